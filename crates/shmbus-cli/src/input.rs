//! Input helpers: the messages `pub`, `pool dispatch` and `journal append` send.

use std::io::BufRead;

use crate::{CliError, Result};

/// Calls `f` with `--data` once, or with each stdin line (without its newline; a last line
/// without newline counts too).
///
/// `max_len` is the most one message can hold (a topic's slot, a queue's element, …): a
/// line longer than that is an error, found while reading it and without holding more than
/// `max_len` bytes of it, so a huge or endless line never makes this process grow. The lines
/// before it have been sent; the error says which line it was.
/// `--data` is already in memory: it goes to `f` as it is, whose send reports a size the
/// channel cannot take in the kind's own words.
///
/// At most `limit` stdin lines are read (`pub --count`): the lines after them are left unread.
pub fn for_each_input_up_to(
    data: Option<&str>,
    max_len: usize,
    limit: Option<u64>,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    match data {
        Some(d) => f(d.as_bytes()),
        None => for_each_line(&mut std::io::stdin().lock(), max_len, limit, f),
    }
}

/// [`for_each_input_up_to`]'s line loop over any reader, stopping after `limit` lines.
fn for_each_line(
    input: &mut impl BufRead,
    max_len: usize,
    limit: Option<u64>,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        if limit.is_some_and(|n| number >= n) {
            return Ok(());
        }
        line.clear();
        number += 1;
        match read_line_bounded(input, &mut line, max_len)? {
            Line::End => return Ok(()),
            Line::TooLong => return Err(too_long(number, max_len)),
            Line::Read => f(&line)?,
        }
    }
}

/// What [`read_line_bounded`] found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line is in the buffer.
    Read,
    /// The line was longer than the limit; it has been read to its end and dropped.
    TooLong,
    /// End of input, no line.
    End,
}

/// Reads one line into `line` (without its newline), keeping at most `max_len` bytes: past
/// that the rest of the line is read and dropped in buffer-sized pieces.
fn read_line_bounded(input: &mut impl BufRead, line: &mut Vec<u8>, max_len: usize) -> Result<Line> {
    let mut seen_any = false;
    let mut too_long = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::msg(format!("reading stdin: {e}"))),
        };
        if chunk.is_empty() {
            return Ok(match (seen_any, too_long) {
                (false, _) => Line::End,
                (true, true) => Line::TooLong,
                (true, false) => Line::Read,
            });
        }
        seen_any = true;
        let (piece, used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], i + 1, true),
            None => (chunk, chunk.len(), false),
        };
        if !too_long {
            if line.len() + piece.len() > max_len {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(piece);
            }
        }
        input.consume(used);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

fn too_long(line: u64, max_len: usize) -> CliError {
    CliError::msg(format!(
        "stdin line {line} is longer than {max_len} bytes, the largest message this channel or \
         journal takes (set when it was created); split the line, or send it to one created \
         for larger messages"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> (Vec<Vec<u8>>, Option<String>) {
        let mut got = Vec::new();
        let r = for_each_line(&mut std::io::BufReader::with_capacity(4, input), max, None, |l| {
            got.push(l.to_vec());
            Ok(())
        });
        (got, r.err().map(|e| e.to_string()))
    }

    #[test]
    fn lines_are_split_and_the_last_needs_no_newline() {
        let (got, err) = lines(b"ab\n\ncdefgh\nij", 8);
        assert_eq!(got, vec![b"ab".to_vec(), b"".to_vec(), b"cdefgh".to_vec(), b"ij".to_vec()]);
        assert_eq!(err, None);
    }

    #[test]
    fn a_line_at_the_limit_passes_and_one_past_it_stops_with_its_number() {
        let (got, err) = lines(b"12345678\n123456789\nnot reached\n", 8);
        assert_eq!(got, vec![b"12345678".to_vec()]);
        let err = err.expect("the long line is an error");
        assert!(err.contains("stdin line 2 is longer than 8 bytes"), "{err}");
    }

    #[test]
    fn a_limit_stops_after_that_many_lines_without_reading_on() {
        let mut input = std::io::BufReader::with_capacity(4, &b"a\nb\nc\n"[..]);
        let mut got = Vec::new();
        for_each_line(&mut input, 8, Some(2), |l| {
            got.push(l.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut input, &mut rest).unwrap();
        assert_eq!(rest, "c\n");
    }

    #[test]
    fn a_long_last_line_without_newline_is_an_error_too() {
        let (got, err) = lines(b"ok\n0123456789abcdef", 8);
        assert_eq!(got, vec![b"ok".to_vec()]);
        assert!(err.expect("error").contains("stdin line 2"));
    }

    #[test]
    fn a_huge_line_is_never_held_whole() {
        // 64 MiB of one line against a 4 KiB limit: the buffer never grows past the limit.
        struct Endless(usize);
        impl std::io::Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0);
                buf[..n].fill(b'x');
                self.0 -= n;
                Ok(n)
            }
        }
        let mut input = std::io::BufReader::new(Endless(64 << 20));
        let mut line = Vec::new();
        assert_eq!(read_line_bounded(&mut input, &mut line, 4096).unwrap(), Line::TooLong);
        assert!(line.capacity() <= 4096 + 8192, "held {} bytes", line.capacity());
    }
}
