//! `shmbus snapshot`: the newest message of an image topic, written as a PNG file.
//!
//! The topic's schema says what its messages are: `sensor_msgs/msg/Image` in CDR (schema
//! encoding `ros2msg` or `ros2idl`) or `foxglove.RawImage` in protobuf. The message is read
//! here, field by field, rather than through the channel's codec: a 6 MB frame would be
//! millions of JSON values. Pixel encodings: `rgb8`, `bgr8`, `rgba8`, `bgra8`, `mono8`,
//! `mono16` (and their OpenCV names `8UC1`, `8UC3`, `8UC4`, `16UC1`); any other is an
//! error that names it.
//!
//! The message is untrusted (any process may publish on the topic): every length and offset
//! is checked against the bytes there are before it is used, in checked arithmetic; `step`
//! (bytes per row, padding allowed) must hold a row of `width` pixels, and `height` rows of
//! `step` bytes (the last one only as far as its pixels) must fit in `data`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use shmbus::topic::{Topic, TopicGetError, TopicRecvTimeoutError};

use crate::output::print_json;
use crate::{CliError, Ctx, Result};

/// `shmbus snapshot --domain D TOPIC --out FILE.png [--wait SECS] [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic's domain (or give the topic as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long, value_name = "D")]
    pub domain: Option<String>,
    /// The image topic, NAME or D/NAME (schema `sensor_msgs/msg/Image` in CDR, or
    /// `foxglove.RawImage` in protobuf).
    #[arg(value_name = "TOPIC")]
    pub name: String,
    /// The PNG file to write (replaced if it exists).
    #[arg(long, value_name = "FILE.png")]
    pub out: PathBuf,
    /// Wait up to SECS for the topic to be created and for its first message, instead of
    /// failing when there is none yet.
    #[arg(long, value_name = "SECS", value_parser = crate::parse_wait)]
    pub wait: Option<Duration>,
    /// Print {"domain","topic","seq","out","width","height","encoding","bytes"} instead of a
    /// sentence.
    #[arg(long)]
    pub json: bool,
}

/// `snapshot --json`.
#[derive(Debug, Serialize)]
struct SnapshotJson<'a> {
    domain: &'a str,
    topic: &'a str,
    seq: u64,
    out: String,
    width: u32,
    height: u32,
    encoding: &'a str,
    /// Bytes of the PNG file.
    bytes: u64,
}

/// Which image message a topic carries, by its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `sensor_msgs/msg/Image`, CDR.
    RosImage,
    /// `foxglove.RawImage`, protobuf.
    RawImage,
}

fn kind_of(schema: Option<&shmbus::Schema>, topic: &str) -> Result<Kind> {
    let Some(s) = schema else {
        return Err(CliError::usage(format!(
            "topic {topic} has no schema: snapshot reads sensor_msgs/msg/Image (cdr) or foxglove.RawImage (protobuf)"
        )));
    };
    match (s.message_encoding(), s.name()) {
        ("cdr", "sensor_msgs/msg/Image" | "sensor_msgs/Image") => Ok(Kind::RosImage),
        ("protobuf", "foxglove.RawImage") => Ok(Kind::RawImage),
        (enc, name) => Err(CliError::usage(format!(
            "topic {topic} carries {name:?} ({enc}), not an image: snapshot reads sensor_msgs/msg/Image (cdr) or \
             foxglove.RawImage (protobuf)"
        ))),
    }
}

/// Writes the newest message of an image topic as a PNG file.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let ch = crate::target::channel(args.domain.as_deref(), &args.name)?;
    let (domain_name, name) = (ch.domain.as_str(), ch.name.as_str());
    let domain = ctx.domain(domain_name)?;
    let started = Instant::now();
    ctx.wait_for(&domain, &[name], args.wait)?;
    crate::target::require(&domain, name, crate::target::WaitHint::Offer)?;
    let topic = Topic::open(&domain, name)?;
    let kind = kind_of(topic.schema(), name)?;
    let sub = topic.subscriber()?;
    let msg = match sub.latest() {
        Ok(m) => m,
        Err(TopicGetError::NotYet { .. }) => {
            let Some(wait) = args.wait else {
                return Err(CliError::msg(format!(
                    "no message on {}/{} yet; publish one, or pass --wait SECS to wait for it",
                    domain_name, name
                )));
            };
            match sub.recv_timeout(wait.saturating_sub(started.elapsed())) {
                Ok(m) => m,
                Err(TopicRecvTimeoutError::Timeout) => {
                    return Err(CliError::msg(format!(
                        "no message on {}/{} within --wait {} s",
                        domain_name,
                        name,
                        wait.as_secs_f64()
                    )))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    let seq = msg.seq();
    let image = match kind {
        Kind::RosImage => parse_cdr_image(msg.data()),
        Kind::RawImage => parse_raw_image(msg.data()),
    }
    .map_err(|e| CliError::msg(format!("message {seq} of {}/{}: {e}", domain_name, name)))?;
    let png = to_png(&image).map_err(|e| CliError::msg(format!("message {seq} of {}/{}: {e}", domain_name, name)))?;
    write_file(&args.out, &png)?;
    if args.json {
        print_json(&SnapshotJson {
            domain: domain_name,
            topic: name,
            seq,
            out: args.out.display().to_string(),
            width: image.width,
            height: image.height,
            encoding: &image.encoding,
            bytes: png.len() as u64,
        })?;
    } else {
        println!(
            "wrote {}: {}x{} {}, message {seq} of {}/{}",
            args.out.display(),
            image.width,
            image.height,
            image.encoding,
            domain_name,
            name
        );
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |e: std::io::Error| CliError::msg(format!("cannot write {}: {e}", path.display()));
    let mut f = std::fs::File::create(path).map_err(fail)?;
    f.write_all(bytes).map_err(fail)?;
    f.sync_all().map_err(fail)
}

/// The fields of an image message that a picture needs, `data` borrowed from the message.
#[derive(Debug, PartialEq, Eq)]
struct Image<'a> {
    width: u32,
    height: u32,
    encoding: String,
    big_endian: bool,
    step: u32,
    data: &'a [u8],
}

/// A little CDR reader over untrusted bytes: alignment counts from after the 4-byte
/// encapsulation header, every read is bounds-checked.
struct Cdr<'a> {
    buf: &'a [u8],
    pos: usize,
    big_endian: bool,
}

impl<'a> Cdr<'a> {
    fn new(msg: &'a [u8]) -> std::result::Result<Cdr<'a>, String> {
        let Some(head) = msg.get(..4) else {
            return Err(format!("{} bytes is too short for a CDR message", msg.len()));
        };
        let big_endian = match head[1] {
            0 => true,
            1 => false,
            k => return Err(format!("CDR encapsulation kind {k} is not plain CDR (0 or 1)")),
        };
        Ok(Cdr { buf: &msg[4..], pos: 0, big_endian })
    }

    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(format!("the message ends inside {what} ({} bytes after its header)", self.buf.len()));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self, what: &str) -> std::result::Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &str) -> std::result::Result<u32, String> {
        let pad = (4 - self.pos % 4) % 4;
        self.take(pad, what)?;
        let b: [u8; 4] = self.take(4, what)?.try_into().map_err(|_| what.to_string())?;
        Ok(if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }

    fn bytes(&mut self, what: &str) -> std::result::Result<&'a [u8], String> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }

    fn string(&mut self, what: &str) -> std::result::Result<String, String> {
        let b = self.bytes(what)?;
        let b = b.strip_suffix(&[0]).unwrap_or(b);
        Ok(String::from_utf8_lossy(b).into_owned())
    }
}

/// `sensor_msgs/msg/Image` in CDR: header (stamp, frame_id), height, width, encoding,
/// is_bigendian, step, data.
fn parse_cdr_image(msg: &[u8]) -> std::result::Result<Image<'_>, String> {
    let mut c = Cdr::new(msg)?;
    c.u32("header.stamp.sec")?;
    c.u32("header.stamp.nanosec")?;
    c.string("header.frame_id")?;
    let height = c.u32("height")?;
    let width = c.u32("width")?;
    let encoding = c.string("encoding")?;
    let big_endian = c.u8("is_bigendian")? != 0;
    let step = c.u32("step")?;
    let data = c.bytes("data")?;
    Ok(Image { width, height, encoding, big_endian, step, data })
}

/// `foxglove.RawImage` in protobuf: timestamp = 1, frame_id = 7, width = 2, height = 3
/// (fixed32), encoding = 4, step = 5 (fixed32), data = 6. Unknown fields are skipped; a
/// field given twice takes its last value, as protobuf does. Multi-byte pixels are
/// little-endian (the message has no field to say otherwise).
fn parse_raw_image(msg: &[u8]) -> std::result::Result<Image<'_>, String> {
    let mut img = Image { width: 0, height: 0, encoding: String::new(), big_endian: false, step: 0, data: &[] };
    let mut pos = 0usize;
    let short = |what: &str| format!("the message ends inside {what}");
    let varint = |pos: &mut usize| -> std::result::Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = *msg.get(*pos).ok_or_else(|| short("a varint"))?;
            *pos += 1;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            }
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint longer than 10 bytes".into())
    };
    while pos < msg.len() {
        let key = varint(&mut pos)?;
        let (field, wire) = (key >> 3, key & 7);
        let value: Option<u64>;
        let mut bytes: &[u8] = &[];
        match wire {
            0 => value = Some(varint(&mut pos)?),
            1 => {
                let b = msg
                    .get(pos..pos.checked_add(8).ok_or_else(|| short("a fixed64"))?)
                    .ok_or_else(|| short("a fixed64"))?;
                pos += 8;
                value = Some(u64::from_le_bytes(b.try_into().map_err(|_| short("a fixed64"))?));
            }
            2 => {
                let n = usize::try_from(varint(&mut pos)?).map_err(|_| short("a length-delimited field"))?;
                let end =
                    pos.checked_add(n).filter(|&e| e <= msg.len()).ok_or_else(|| short(&format!("field {field}")))?;
                bytes = &msg[pos..end];
                pos = end;
                value = None;
            }
            5 => {
                let b = msg
                    .get(pos..pos.checked_add(4).ok_or_else(|| short("a fixed32"))?)
                    .ok_or_else(|| short("a fixed32"))?;
                pos += 4;
                value = Some(u64::from(u32::from_le_bytes(b.try_into().map_err(|_| short("a fixed32"))?)));
            }
            w => return Err(format!("field {field} has wire type {w}, which is not protobuf's")),
        }
        let as_u32 = |name: &str| -> std::result::Result<u32, String> {
            let v = value.ok_or_else(|| format!("{name} is not a number"))?;
            u32::try_from(v).map_err(|_| format!("{name} {v} is out of range"))
        };
        match field {
            2 => img.width = as_u32("width")?,
            3 => img.height = as_u32("height")?,
            4 => img.encoding = String::from_utf8_lossy(bytes).into_owned(),
            5 => img.step = as_u32("step")?,
            6 => img.data = bytes,
            _ => {}
        }
    }
    Ok(img)
}

/// A pixel encoding as PNG takes it: colour type, bit depth, bytes per pixel, and whether
/// the first and third channel swap (BGR to RGB).
fn png_format(encoding: &str) -> std::result::Result<(png::ColorType, png::BitDepth, usize, bool), String> {
    use png::{BitDepth::*, ColorType::*};
    Ok(match encoding {
        "rgb8" => (Rgb, Eight, 3, false),
        "bgr8" | "8UC3" => (Rgb, Eight, 3, true),
        "rgba8" => (Rgba, Eight, 4, false),
        "bgra8" | "8UC4" => (Rgba, Eight, 4, true),
        "mono8" | "8UC1" => (Grayscale, Eight, 1, false),
        "mono16" | "16UC1" => (Grayscale, Sixteen, 2, false),
        other => {
            return Err(format!(
                "pixel encoding {other:?} is not one snapshot writes (rgb8, bgr8, rgba8, bgra8, mono8, mono16)"
            ))
        }
    })
}

/// The PNG file of `img`, after checking its sizes against its data.
fn to_png(img: &Image<'_>) -> std::result::Result<Vec<u8>, String> {
    let (color, depth, bpp, swap) = png_format(&img.encoding)?;
    let (w, h) = (img.width, img.height);
    if w == 0 || h == 0 {
        return Err(format!("the image is empty ({w}x{h})"));
    }
    // PNG's limit on each side.
    if w > i32::MAX as u32 || h > i32::MAX as u32 {
        return Err(format!("{w}x{h} is larger than a PNG can be"));
    }
    let too_big = || format!("{w}x{h} {} is larger than this machine can address", img.encoding);
    let row = (w as usize).checked_mul(bpp).ok_or_else(too_big)?;
    let step = img.step as usize;
    if step < row {
        return Err(format!("step {step} is less than a row of {w} {} pixels ({row} bytes)", img.encoding));
    }
    // The last row needs only its pixels, not its padding.
    let needed = step.checked_mul(h as usize - 1).and_then(|n| n.checked_add(row)).ok_or_else(too_big)?;
    if img.data.len() < needed {
        return Err(format!(
            "data is {} bytes, too short for {h} rows of step {step} ({w}x{h} {} needs {needed})",
            img.data.len(),
            img.encoding
        ));
    }
    let mut pixels = Vec::with_capacity(row.checked_mul(h as usize).ok_or_else(too_big)?);
    for y in 0..h as usize {
        let start = y * step; // y * step + row <= needed <= data.len(), checked above
        let src = &img.data[start..start + row];
        let at = pixels.len();
        pixels.extend_from_slice(src);
        let dst = &mut pixels[at..];
        if swap {
            for px in dst.chunks_exact_mut(bpp) {
                px.swap(0, 2);
            }
        }
        // PNG samples are big-endian.
        if bpp == 2 && !img.big_endian {
            for px in dst.chunks_exact_mut(2) {
                px.swap(0, 1);
            }
        }
    }
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(color);
    enc.set_depth(depth);
    enc.set_compression(png::Compression::Fast);
    let mut writer = enc.write_header().map_err(|e| format!("PNG: {e}"))?;
    writer.write_image_data(&pixels).map_err(|e| format!("PNG: {e}"))?;
    writer.finish().map_err(|e| format!("PNG: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img<'a>(width: u32, height: u32, encoding: &str, step: u32, data: &'a [u8]) -> Image<'a> {
        Image { width, height, encoding: encoding.into(), big_endian: false, step, data }
    }

    #[test]
    fn the_demo_cameras_frame_parses() {
        let f = shmbus_profile::camera::Frame::for_bytes(1080);
        let mut msg = vec![0u8; f.message_len()];
        f.write_header(&mut msg, 1, 2);
        let i = parse_cdr_image(&msg).unwrap();
        assert_eq!((i.width, i.height, i.encoding.as_str(), i.step, i.data.len()), (24, 15, "rgb8", 72, 1080));
    }

    #[test]
    fn every_truncation_of_a_message_is_an_error() {
        let f = shmbus_profile::camera::Frame::for_bytes(60);
        let mut msg = vec![0u8; f.message_len()];
        f.write_header(&mut msg, 1, 2);
        for n in 0..msg.len() {
            assert!(parse_cdr_image(&msg[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn sizes_are_checked_before_any_pixel_is_read() {
        assert!(to_png(&img(2, 2, "rgb8", 6, &[0; 12])).is_ok());
        // The last row needs no padding.
        assert!(to_png(&img(2, 2, "rgb8", 8, &[0; 14])).is_ok());
        assert!(to_png(&img(2, 2, "rgb8", 8, &[0; 13])).unwrap_err().contains("too short"));
        assert!(to_png(&img(2, 2, "rgb8", 5, &[0; 12])).unwrap_err().contains("step 5 is less"));
        assert!(to_png(&img(u32::MAX, u32::MAX, "rgba8", u32::MAX, &[0; 12])).is_err());
        assert!(to_png(&img(0, 2, "rgb8", 6, &[0; 12])).unwrap_err().contains("empty"));
        assert!(to_png(&img(2, 2, "yuv422", 6, &[0; 12])).unwrap_err().contains("\"yuv422\""));
    }

    #[test]
    fn a_raw_image_parses_with_unknown_fields_skipped() {
        // width=2 (fixed32), height=1 (fixed32), encoding="mono8", step=2, data=[7, 9],
        // and field 9 (varint) that this reader does not know.
        let mut m = vec![0x15, 2, 0, 0, 0, 0x1d, 1, 0, 0, 0];
        m.extend([0x22, 5]);
        m.extend(b"mono8");
        m.extend([0x2d, 2, 0, 0, 0, 0x48, 0x96, 0x01, 0x32, 2, 7, 9]);
        let i = parse_raw_image(&m).unwrap();
        assert_eq!((i.width, i.height, i.encoding.as_str(), i.step, i.data), (2, 1, "mono8", 2, &[7u8, 9][..]));
        for n in 0..m.len() {
            // A cut inside a field fails; a cut between fields is a shorter message.
            let _ = parse_raw_image(&m[..n]);
        }
        assert!(parse_raw_image(&[0x32, 5, 1]).is_err());
    }
}
