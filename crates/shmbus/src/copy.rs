//! Copying a large payload into pages nobody will read from this core again: the journal's
//! copy-append of big entries.
//!
//! An ordinary copy first reads every destination cache line it writes (read for
//! ownership): for a fresh journal page that is a line the kernel (or the pretoucher on
//! another core) has just zeroed, fetched only to be overwritten. Non-temporal stores write
//! whole lines straight towards memory instead, which leaves the memory bandwidth that
//! read took to the copy itself and to the kernel zeroing the next pages.

/// Payloads shorter than this are copied with ordinary stores: they fit in the cache, and a
/// tailer reading right behind the appender finds them there.
pub const STREAM_MIN: usize = 16 << 10;

/// Copies `src` into `dst` (the same length), with non-temporal stores where the length is
/// at least [`STREAM_MIN`] and the CPU has them. Every byte is visible to other cores (in
/// the order of this thread's later stores) when this returns.
///
/// # Panics
/// If the lengths differ.
pub fn copy_to_fresh(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_to_fresh: lengths differ");
    #[cfg(target_arch = "x86_64")]
    if src.len() >= STREAM_MIN {
        // SAFETY: `dst` and `src` are valid for `len` bytes and cannot overlap (`dst` is
        // borrowed mutably).
        unsafe { copy_streaming_sse2(dst.as_mut_ptr(), src.as_ptr(), src.len()) };
        return;
    }
    dst.copy_from_slice(src);
}

/// The non-temporal copy: ordinary stores up to the first 64-byte line boundary of `dst` and
/// for the partial line at the end, `movntdq` for the whole lines between, then `sfence`.
///
/// # Safety
/// `dst` and `src` valid for `len` bytes each, not overlapping.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_streaming_sse2(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    const LINE: usize = 64;
    let head = dst.align_offset(LINE).min(len);
    // SAFETY: every offset below stays under `len` (the loop runs while a whole line
    // remains), and `dst + i` is 16-byte aligned for `i >= head` since `dst + head` is
    // 64-byte aligned; `movntdq` needs that alignment, `movdqu` none.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + LINE <= len {
            let s = src.add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
            let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
            i += LINE;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
        // Non-temporal stores are weakly ordered: fence them before whatever publishes the
        // bytes (the commit's Release CAS).
        _mm_sfence();
    }
}

#[cfg(test)]
mod tests {
    use super::{copy_to_fresh, STREAM_MIN};

    #[test]
    fn every_length_and_alignment_copies_exactly() {
        let src: Vec<u8> = (0..STREAM_MIN * 2 + 200).map(|i| (i * 31 + 7) as u8).collect();
        let mut buf = vec![0xAAu8; src.len() + 128];
        let lens =
            [0, 1, 63, 64, 65, 4096, STREAM_MIN - 1, STREAM_MIN, STREAM_MIN + 1, STREAM_MIN + 63, STREAM_MIN * 2 + 200];
        for &len in &lens {
            for dst_off in [0, 1, 8, 32, 63] {
                for src_off in [0, 3] {
                    let len = len.min(src.len() - src_off);
                    buf.fill(0xAA);
                    copy_to_fresh(&mut buf[dst_off..dst_off + len], &src[src_off..src_off + len]);
                    assert_eq!(
                        &buf[dst_off..dst_off + len],
                        &src[src_off..src_off + len],
                        "len {len} dst+{dst_off} src+{src_off}"
                    );
                    assert!(buf[..dst_off].iter().all(|&b| b == 0xAA), "wrote before dst (len {len})");
                    assert!(buf[dst_off + len..].iter().all(|&b| b == 0xAA), "wrote past dst (len {len})");
                }
            }
        }
    }
}
