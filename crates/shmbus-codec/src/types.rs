//! The type model that both ROS 2 schema languages (`ros2msg`, `ros2idl`) parse into and the
//! CDR codec walks: structs of fields, each a primitive or a struct, single or an array.

use serde_json::Value;

/// A primitive type of the ROS 2 interface language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prim {
    Bool,
    /// `byte` (IDL `octet`): an unsigned 8-bit value.
    Byte,
    /// `char`: an unsigned 8-bit value in ROS 2.
    Char,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// `string` with an optional bound (`string<=N`).
    Str(Option<usize>),
    /// `wstring` with an optional bound.
    WStr(Option<usize>),
}

impl Prim {
    /// The type's name in the ros2msg language (for error messages).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Prim::Bool => "bool",
            Prim::Byte => "byte",
            Prim::Char => "char",
            Prim::I8 => "int8",
            Prim::U8 => "uint8",
            Prim::I16 => "int16",
            Prim::U16 => "uint16",
            Prim::I32 => "int32",
            Prim::U32 => "uint32",
            Prim::I64 => "int64",
            Prim::U64 => "uint64",
            Prim::F32 => "float32",
            Prim::F64 => "float64",
            Prim::Str(_) => "string",
            Prim::WStr(_) => "wstring",
        }
    }

    /// The size in bytes of a fixed-size primitive (also its CDR alignment); `None` for
    /// strings.
    pub(crate) fn size(self) -> Option<usize> {
        Some(match self {
            Prim::Bool | Prim::Byte | Prim::Char | Prim::I8 | Prim::U8 => 1,
            Prim::I16 | Prim::U16 => 2,
            Prim::I32 | Prim::U32 | Prim::F32 => 4,
            Prim::I64 | Prim::U64 | Prim::F64 => 8,
            Prim::Str(_) | Prim::WStr(_) => return None,
        })
    }

    /// Whether arrays of this type are byte arrays (summarised when long).
    pub(crate) fn is_bytelike(self) -> bool {
        matches!(self, Prim::Byte | Prim::Char | Prim::U8)
    }

    /// The primitive named `name` in ros2msg (`None` for a struct name).
    pub(crate) fn from_msg_name(name: &str) -> Option<Prim> {
        Some(match name {
            "bool" => Prim::Bool,
            "byte" => Prim::Byte,
            "char" => Prim::Char,
            "int8" => Prim::I8,
            "uint8" => Prim::U8,
            "int16" => Prim::I16,
            "uint16" => Prim::U16,
            "int32" => Prim::I32,
            "uint32" => Prim::U32,
            "int64" => Prim::I64,
            "uint64" => Prim::U64,
            "float32" => Prim::F32,
            "float64" => Prim::F64,
            "string" => Prim::Str(None),
            "wstring" => Prim::WStr(None),
            _ => return None,
        })
    }
}

/// A field's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Prim(Prim),
    /// An index into [`Types::structs`].
    Struct(usize),
}

/// Single value or array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arity {
    Single,
    /// `T[N]`: exactly N elements, no length on the wire.
    Fixed(usize),
    /// `T[<=N]` (IDL `sequence<T, N>`): a length then at most N elements.
    Bounded(usize),
    /// `T[]` (IDL `sequence<T>`): a length then the elements.
    Unbounded,
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) ty: Ty,
    pub(crate) arity: Arity,
    /// The declared default (`int32 x 5`), used by encode for a missing field.
    pub(crate) default: Option<Value>,
}

#[derive(Debug, Clone)]
pub(crate) struct StructDef {
    /// `pkg/msg/Type`.
    pub(crate) name: String,
    /// Empty: an empty message, one `uint8` on the wire (as rosidl generates).
    pub(crate) fields: Vec<Field>,
}

/// A schema's types: every struct, and which one is the message.
#[derive(Debug, Clone)]
pub(crate) struct Types {
    pub(crate) structs: Vec<StructDef>,
    pub(crate) root: usize,
}

/// Largest fixed array or bound a schema may declare (elements).
pub(crate) const MAX_ARRAY_LEN: usize = 1 << 24;
/// Most struct types a schema may define.
pub(crate) const MAX_TYPES: usize = 10_000;

/// `pkg/Type`, `pkg/msg/Type` or `Type` (in `pkg`) as the canonical `pkg/msg/Type`.
pub(crate) fn canonical(name: &str, pkg: &str) -> String {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        [ty] => format!("{pkg}/msg/{ty}"),
        [p, ty] => format!("{p}/msg/{ty}"),
        [p, kind, ty] => format!("{p}/{kind}/{ty}"),
        _ => name.to_owned(),
    }
}

/// The package of a canonical name (`pkg/msg/Type` -> `pkg`).
pub(crate) fn package(name: &str) -> &str {
    name.split('/').next().unwrap_or("")
}

/// The definitions every ROS 2 system has, added when a schema uses them without giving them.
pub(crate) const IMPLICIT: &[(&str, &str)] = &[
    ("builtin_interfaces/msg/Time", "int32 sec\nuint32 nanosec\n"),
    ("builtin_interfaces/msg/Duration", "int32 sec\nuint32 nanosec\n"),
    ("std_msgs/msg/Header", "builtin_interfaces/Time stamp\nstring frame_id\n"),
];
