//! The `#[derive(Pod)]` macro of shmbus. Use it through `shmbus` (`#[derive(shmbus::Pod)]`,
//! feature `derive`, on by default), not from this crate directly.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Member};

/// Implements `shmbus::Pod` for a struct after checking, at compile time, that it may travel
/// through shared memory as its bytes, and describes its layout for the channel schema
/// (`shmbus::pod::pod_schema`).
///
/// ```
/// #[derive(Debug, Clone, Copy, PartialEq, shmbus::Pod)]
/// #[repr(C)]
/// struct Pose {
///     xyz: [f64; 3],
///     quality: u32,
///     _pad: u32, // explicit: 24 + 4 + 4 = 32, a multiple of the alignment 8
/// }
///
/// #[derive(Debug, Clone, Copy, PartialEq, shmbus::Pod)]
/// #[repr(C)]
/// struct Imu {
///     t_ns: u64,
///     accel: [f32; 3],
///     gyro: [f32; 3],
///     pose: Pose,
/// }
///
/// let (name, json) = shmbus::pod::pod_schema::<Imu>().unwrap();
/// assert!(name.ends_with("::Imu"));
/// assert!(json.contains(r#"{"name":"accel","offset":8,"type":"f32","shape":[3]}"#));
/// ```
///
/// # What it checks
///
/// The derive refuses to compile a type that does not meet `Pod`'s rules:
/// * it must be a struct (not an enum or a union) with at least one field and no generic
///   parameters;
/// * it must be `#[repr(C)]` (optionally with `align(N)` or `packed`) or
///   `#[repr(transparent)]`: a layout every process and a C peer agree on;
/// * every field's type must be `Pod` itself: integers, floats, arrays of `Pod` and other
///   `Pod` structs. Pointers, references, `bool`, `char`, enums and `NonZero*` are not (a
///   peer may write any bit pattern, and an address means nothing in another process);
/// * it must have no padding: its size must be the sum of its fields' sizes. Add explicit
///   padding fields (`_pad: u32`) where the compiler would insert padding, including at
///   the end (the size is a multiple of the alignment).
///
/// The struct must also be `Copy` (derive `Clone` and `Copy` with it).
///
/// # The schema
///
/// The impl overrides `Pod::pod_layout`: the struct's name
/// (`concat!(module_path!(), "::", Name)`), size, alignment and, for each field, its name,
/// offset (`core::mem::offset_of!`) and the layout of its type. `shmbus::pod::pod_schema`
/// turns that into the `shmbus-pod` schema JSON a typed channel records, so a tool can
/// decode its messages without the Rust type.
///
/// # Attributes
///
/// `#[shmbus(crate = "path::to::shmbus")]` names the `shmbus` crate when it is not reachable
/// as `::shmbus` (a re-export under another name).
#[proc_macro_derive(Pod, attributes(shmbus))]
pub fn derive_pod(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// One error, or several combined, about the input.
fn error(span: Span, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, message)
}

/// Adds `e` to `errors`.
fn push(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// What the `#[repr(...)]` attributes say.
#[derive(Default)]
struct Repr {
    c_or_transparent: bool,
    other: Vec<(String, Span)>,
}

fn parse_repr(input: &DeriveInput) -> syn::Result<Repr> {
    let mut repr = Repr::default();
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|meta| {
            let name = meta.path.to_token_stream().to_string();
            // align(N) and packed(N) carry an argument; consume it.
            if meta.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in meta.input);
                let _: TokenStream = content.parse()?;
            }
            match name.as_str() {
                "C" | "transparent" => repr.c_or_transparent = true,
                "align" | "packed" => {}
                _ => repr.other.push((name, meta.path.span())),
            }
            Ok(())
        })?;
    }
    Ok(repr)
}

/// The path of the `shmbus` crate: `::shmbus` or `#[shmbus(crate = "...")]`.
fn crate_path(input: &DeriveInput) -> syn::Result<syn::Path> {
    let mut path: syn::Path = syn::parse_quote!(::shmbus);
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("shmbus")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let s: syn::LitStr = meta.value()?.parse()?;
                path = s.parse()?;
                Ok(())
            } else {
                Err(meta.error("unknown `shmbus` attribute: expected `crate = \"path\"`"))
            }
        })?;
    }
    Ok(path)
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let ident = &input.ident;
    let mut errors = None;

    let fields = match &input.data {
        Data::Struct(s) => Some(&s.fields),
        Data::Enum(e) => {
            push(
                &mut errors,
                error(
                    e.enum_token.span,
                    "`#[derive(Pod)]` is for structs only: an enum is not valid for every bit pattern",
                ),
            );
            None
        }
        Data::Union(u) => {
            push(
                &mut errors,
                error(
                    u.union_token.span,
                    "`#[derive(Pod)]` is for structs only: a union's fields may have different sizes, leaving padding",
                ),
            );
            None
        }
    };

    let generics = &input.generics;
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        push(
            &mut errors,
            error(
                generics.span(),
                "`#[derive(Pod)]` does not support generic parameters: its layout must be known at the definition",
            ),
        );
    }

    match parse_repr(input) {
        Ok(repr) => {
            for (name, span) in &repr.other {
                push(
                    &mut errors,
                    error(
                        *span,
                        format!("`#[derive(Pod)]` needs `#[repr(C)]` or `#[repr(transparent)]`, not `repr({name})`"),
                    ),
                );
            }
            if !repr.c_or_transparent && repr.other.is_empty() {
                push(
                    &mut errors,
                    error(
                        ident.span(),
                        format!(
                            "`#[derive(Pod)]` needs `#[repr(C)]` (or `#[repr(transparent)]`) on `{ident}`: \
                             Rust's default layout may reorder fields, and other processes and C peers must agree on it"
                        ),
                    ),
                );
            }
        }
        Err(e) => push(&mut errors, e),
    }

    let krate = match crate_path(input) {
        Ok(p) => p,
        Err(e) => {
            push(&mut errors, e);
            syn::parse_quote!(::shmbus)
        }
    };

    if let Some(fields) = fields {
        if fields.is_empty() {
            push(
                &mut errors,
                error(
                    ident.span(),
                    format!("`#[derive(Pod)]` needs at least one field: `{ident}` would be zero-sized"),
                ),
            );
        }
    }

    if let Some(e) = errors {
        return Err(e);
    }
    let fields = fields.expect("a struct, checked above");

    let members: Vec<(Member, String, &syn::Type)> = match fields {
        Fields::Named(named) => named
            .named
            .iter()
            .map(|f| {
                let id = f.ident.clone().expect("a named field");
                let name = id.unraw().to_string();
                (Member::Named(id), name, &f.ty)
            })
            .collect(),
        Fields::Unnamed(unnamed) => unnamed
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| (Member::Unnamed(syn::Index::from(i)), i.to_string(), &f.ty))
            .collect(),
        Fields::Unit => Vec::new(),
    };

    let pod_checks = members.iter().map(|(_, _, ty)| {
        quote_spanned! {ty.span()=> __shmbus_field_is_pod::<#ty>(); }
    });
    let field_sizes = members.iter().map(|(_, _, ty)| quote! { + ::core::mem::size_of::<#ty>() });
    let padding_message = format!(
        "`#[derive(Pod)]`: `{ident}` has padding bytes (its size is more than the sum of its fields' sizes): \
         add explicit padding fields where the compiler inserts them, including at the end"
    );
    let type_name = ident.unraw().to_string();
    let field_layouts = members.iter().map(|(member, name, ty)| {
        quote_spanned! {ty.span()=>
            #krate::pod::PodField {
                name: #name,
                offset: ::core::mem::offset_of!(Self, #member),
                layout: <#ty as #krate::Pod>::pod_layout()?,
            }
        }
    });

    Ok(quote! {
        // Every field is Pod (the error points at the field that is not).
        const _: fn() = || {
            fn __shmbus_field_is_pod<T: #krate::Pod>() {}
            #(#pod_checks)*
        };
        // No padding: every byte belongs to a field.
        const _: () = ::core::assert!(
            ::core::mem::size_of::<#ident>() == 0 #(#field_sizes)*,
            #padding_message
        );
        // SAFETY: checked above and by the compiler: a repr(C)/repr(transparent) struct with
        // no generics, no padding, and only Pod fields (valid for every bit pattern, no
        // pointers).
        #[automatically_derived]
        unsafe impl #krate::Pod for #ident {
            fn pod_layout() -> ::core::option::Option<#krate::pod::PodLayout> {
                ::core::option::Option::Some(#krate::pod::PodLayout::of_struct(#krate::pod::PodStruct {
                    name: ::core::concat!(::core::module_path!(), "::", #type_name),
                    size: ::core::mem::size_of::<Self>(),
                    align: ::core::mem::align_of::<Self>(),
                    fields: ::std::vec![#(#field_layouts),*],
                }))
            }
        }
    })
}
