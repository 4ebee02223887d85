//! The `ros2idl` schema language (OMG IDL as ROS 2 emits it): not parsed yet, so a codec for
//! it is refused with [`CodecError::Unsupported`].

use crate::error::CodecError;
use crate::types::Types;

pub(crate) fn parse(_schema_name: &str, _text: &str) -> Result<Types, CodecError> {
    Err(CodecError::Unsupported {
        message_encoding: "cdr".into(),
        schema_encoding: "ros2idl".into(),
        reason: "ros2idl schemas are not parsed yet (ros2msg schemas are)".into(),
    })
}
