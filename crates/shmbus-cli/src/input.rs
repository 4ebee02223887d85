//! Input helpers: the messages `pub`, `pool dispatch` and `journal append` send.

use std::io::BufRead;

use crate::{CliError, Result};

/// Calls `f` with `--data` once, or with each stdin line (without its newline; a last line
/// without newline counts too).
pub fn for_each_input(data: Option<&str>, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
    if let Some(d) = data {
        return f(d.as_bytes());
    }
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = stdin.read_until(b'\n', &mut line).map_err(|e| CliError::msg(format!("reading stdin: {e}")))?;
        if n == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        f(&line)?;
    }
}
