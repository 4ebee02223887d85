//! The demo camera's frames: `sensor_msgs/msg/Image` messages in CDR, written in place.
//!
//! The `image` topic carries the ROS 2 message type `sensor_msgs/msg/Image` ([`SCHEMA_NAME`],
//! the `ros2msg` text [`IMAGE_MSG`] with its dependencies in MCAP's form, message encoding
//! `cdr`), so `shmbus sub`, `shmbus snapshot`, recordings and Foxglove's Image panel show
//! the frames as pictures. A message is a CDR header (stamp, `frame_id` `camera`, height,
//! width, encoding, `is_bigendian` 0, step, data length: [`Frame::header_len`] bytes) and then
//! the pixels, `--image-bytes` of them:
//!
//! ```text
//! 00 01 00 00 | sec i32 | nanosec u32 | 7 "camera\0" | pad | height u32 | width u32
//!             | 5 "rgb8\0" | is_bigendian u8 | pad | step u32 | data length u32 | pixels
//! ```
//!
//! The picture is a diagonal rainbow that moves a little each frame. The camera writes it
//! fast: one row pattern ([`Frame::pattern`], twice a row wide) is made once, and each row of
//! each frame is a `memcpy` of it from a shifted offset ([`Frame::write_pixels`]), about the
//! cost of the plain fill the camera did before.

/// The schema name of the camera's messages.
pub const SCHEMA_NAME: &str = "sensor_msgs/msg/Image";
/// Their message encoding.
pub const MESSAGE_ENCODING: &str = "cdr";
/// Their schema encoding.
pub const SCHEMA_ENCODING: &str = "ros2msg";
/// The `frame_id` of every frame.
pub const FRAME_ID: &str = "camera";

/// `sensor_msgs/msg/Image` as `ros2msg` schema data: the message, then each type it uses
/// after a `===` line and `MSG: <type>`, as MCAP and rosbag2 store it.
pub const IMAGE_MSG: &str = "\
# This message contains an uncompressed image
std_msgs/Header header
uint32 height
uint32 width
string encoding
uint8 is_bigendian
uint32 step
uint8[] data
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
";

/// The shape of the camera's frames for a given pixel byte count (`--image-bytes`): rgb8
/// when it is a multiple of 3, else mono8; as close to 16:9 as the count's divisors allow
/// (the default, 6,220,800 B, is 1920x1080 rgb8). The pixel bytes are exactly the count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// `rgb8` or `mono8`.
    pub encoding: &'static str,
    /// Bytes per pixel.
    pub bpp: usize,
    header: Vec<u8>,
}

impl Frame {
    /// The frame whose pixels are `pixel_bytes` bytes.
    pub fn for_bytes(pixel_bytes: usize) -> Frame {
        let (encoding, bpp) = if pixel_bytes % 3 == 0 { ("rgb8", 3) } else { ("mono8", 1) };
        let pixels = pixel_bytes / bpp;
        // The divisor of `pixels` nearest the width of a 16:9 picture of that many pixels.
        let target = (pixels as f64 * 16.0 / 9.0).sqrt();
        let mut width = pixels;
        let mut d = 1usize;
        while d.saturating_mul(d) <= pixels {
            if pixels % d == 0 {
                for w in [d, pixels / d] {
                    if (w as f64 - target).abs() < (width as f64 - target).abs() {
                        width = w;
                    }
                }
            }
            d += 1;
        }
        let height = pixels.checked_div(width).unwrap_or(0);
        let (width, height) = (u32::try_from(width).unwrap_or(u32::MAX), u32::try_from(height).unwrap_or(u32::MAX));
        let mut frame = Frame { width, height, encoding, bpp, header: Vec::new() };
        frame.header = frame.cdr_header(pixel_bytes);
        frame
    }

    /// Bytes per row (`step`).
    pub fn step(&self) -> usize {
        self.width as usize * self.bpp
    }

    /// Bytes of pixels.
    pub fn pixel_bytes(&self) -> usize {
        self.step() * self.height as usize
    }

    /// Bytes of the CDR message before the pixels.
    pub fn header_len(&self) -> usize {
        self.header.len()
    }

    /// Bytes of the whole message: header and pixels.
    pub fn message_len(&self) -> usize {
        self.header_len() + self.pixel_bytes()
    }

    /// The CDR encapsulation and every field before the pixels, with a zero stamp.
    fn cdr_header(&self, pixel_bytes: usize) -> Vec<u8> {
        let mut c = Cdr(vec![0, 1, 0, 0]); // CDR, little-endian
        c.u32(0); // header.stamp.sec
        c.u32(0); // header.stamp.nanosec
        c.string(FRAME_ID);
        c.u32(self.height);
        c.u32(self.width);
        c.string(self.encoding);
        c.0.push(0); // is_bigendian
        c.u32(u32::try_from(self.step()).unwrap_or(u32::MAX));
        c.u32(u32::try_from(pixel_bytes).unwrap_or(u32::MAX)); // data: sequence length
        c.0
    }

    /// Writes the header, stamped `sec`.`nanosec`, into the first [`Frame::header_len`] bytes
    /// of `msg` (which must be at least that long).
    pub fn write_header(&self, msg: &mut [u8], sec: i32, nanosec: u32) {
        msg[..self.header.len()].copy_from_slice(&self.header);
        msg[4..8].copy_from_slice(&sec.to_le_bytes());
        msg[8..12].copy_from_slice(&nanosec.to_le_bytes());
    }

    /// One row of the picture, twice over (so that any row-wide window of it is a shifted
    /// row): a rainbow across the width for rgb8, a ramp for mono8.
    pub fn pattern(&self) -> Vec<u8> {
        let w = self.width.max(1) as usize;
        let mut row = Vec::with_capacity(2 * w * self.bpp);
        for x in 0..2 * w {
            let t = (x % w) as f64 / w as f64; // 0..1 across the row
            if self.bpp == 3 {
                row.extend_from_slice(&hue(t));
            } else {
                row.push((t * 255.0) as u8);
            }
        }
        row
    }

    /// Writes the pixels of frame number `n` into `pixels` (at least [`Frame::pixel_bytes`]
    /// long) from [`Frame::pattern`]'s `pattern`: row `y` starts `4n + y/2` pixels into it,
    /// so the rainbow leans and moves.
    pub fn write_pixels(&self, pixels: &mut [u8], pattern: &[u8], n: u64) {
        let (w, step) = (self.width.max(1) as u64, self.step());
        if step == 0 {
            return;
        }
        for (y, row) in pixels[..self.pixel_bytes()].chunks_exact_mut(step).enumerate() {
            let shift = ((n.wrapping_mul(4) + y as u64 / 2) % w) as usize * self.bpp;
            row.copy_from_slice(&pattern[shift..shift + step]);
        }
    }
}

/// A fully saturated colour of hue `t` (0..1 around the wheel), as RGB.
fn hue(t: f64) -> [u8; 3] {
    let h = (t * 6.0).rem_euclid(6.0);
    let x = ((1.0 - (h % 2.0 - 1.0).abs()) * 255.0) as u8;
    match h as u32 {
        0 => [255, x, 0],
        1 => [x, 255, 0],
        2 => [0, 255, x],
        3 => [0, x, 255],
        4 => [x, 0, 255],
        _ => [255, 0, x],
    }
}

/// A little-endian CDR writer: alignment counts from after the 4-byte encapsulation.
struct Cdr(Vec<u8>);

impl Cdr {
    fn u32(&mut self, v: u32) {
        while (self.0.len() - 4) % 4 != 0 {
            self.0.push(0);
        }
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn string(&mut self, s: &str) {
        self.u32(s.len() as u32 + 1);
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_frame_is_full_hd_rgb8() {
        let f = Frame::for_bytes(crate::IMAGE_BYTES);
        assert_eq!((f.width, f.height, f.encoding, f.step()), (1920, 1080, "rgb8", 5760));
        assert_eq!(f.header_len(), 52);
        assert_eq!(f.message_len(), crate::IMAGE_BYTES + 52);
    }

    #[test]
    fn other_sizes_keep_their_bytes() {
        for (bytes, w, h, enc) in [(1080, 24, 15, "rgb8"), (100_000, 400, 250, "mono8"), (65_536, 256, 256, "mono8")] {
            let f = Frame::for_bytes(bytes);
            assert_eq!((f.width, f.height, f.encoding), (w, h, enc), "{bytes}");
            assert_eq!(f.pixel_bytes(), bytes);
        }
        let prime = Frame::for_bytes(7919);
        assert_eq!(prime.pixel_bytes(), 7919);
        assert_eq!(Frame::for_bytes(0).pixel_bytes(), 0);
    }

    #[test]
    fn the_header_is_cdr_of_an_image() {
        let f = Frame::for_bytes(1080);
        let mut msg = vec![0xAA; f.message_len()];
        f.write_header(&mut msg, 7, 9);
        let u32_at = |o: usize| u32::from_le_bytes(msg[o..o + 4].try_into().unwrap());
        assert_eq!(&msg[..4], &[0, 1, 0, 0]);
        assert_eq!((u32_at(4), u32_at(8), u32_at(12)), (7, 9, 7));
        assert_eq!(&msg[16..23], b"camera\0");
        assert_eq!((u32_at(24), u32_at(28), u32_at(32)), (15, 24, 5));
        assert_eq!(&msg[36..41], b"rgb8\0");
        assert_eq!(msg[41], 0);
        assert_eq!((u32_at(44), u32_at(48)), (72, 1080));
    }

    #[test]
    fn rows_are_shifted_copies_of_the_pattern() {
        let f = Frame::for_bytes(1080);
        let p = f.pattern();
        let mut px = vec![0; f.pixel_bytes()];
        f.write_pixels(&mut px, &p, 0);
        assert_eq!(&px[..3], &[255, 0, 0]);
        assert_eq!(&px[..72], &p[..72]);
        let before = px.clone();
        f.write_pixels(&mut px, &p, 1);
        assert_ne!(px, before, "the picture moves");
        assert_eq!(&px[..72], &p[12..84]);
    }
}
