//! Request bodies read as raw JSON, so the domain parser can report every problem at once in
//! our own error shape.

use std::marker::PhantomData;

use poem::{Request, RequestBody};
use poem_openapi::registry::{MetaMediaType, MetaRequest, Registry};
use poem_openapi::types::Type;
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions};

use crate::error::IntakeError;

/// Largest intake request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A JSON body documented as `T` but read as raw JSON, so that every problem is
/// reported by the domain parser rather than the first one by the framework. `REQUIRED`
/// false makes the body optional ([`OptionalJson`]).
pub struct LenientJson<T, const REQUIRED: bool = true> {
    /// The body as sent.
    pub raw: String,
    /// The parsed JSON.
    pub value: serde_json::Value,
    _doc: PhantomData<T>,
}

/// A [`LenientJson`] body that may be left out: no body at all reads as `{}`, so an
/// operation whose fields are all optional takes a request without one, as its document
/// says.
pub type OptionalJson<T> = LenientJson<T, false>;

impl<T, const REQUIRED: bool> LenientJson<T, REQUIRED> {
    async fn read(body: &mut RequestBody) -> Result<Self, IntakeError> {
        let bytes = match body.take() {
            Ok(b) => b
                .into_bytes_limit(MAX_BODY_BYTES)
                .await
                .map_err(|e| match e {
                    poem::error::ReadBodyError::PayloadTooLarge => IntakeError::PayloadTooLarge,
                    _ => IntakeError::Unreadable,
                })?,
            Err(_) => Default::default(),
        };
        let raw = String::from_utf8(bytes.to_vec()).map_err(|_| IntakeError::NotJson)?;
        let value = if raw.is_empty() && !REQUIRED {
            serde_json::Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(&raw).map_err(|_| IntakeError::NotJson)?
        };
        Ok(Self {
            raw,
            value,
            _doc: PhantomData,
        })
    }
}

impl<'a, T: Type, const REQUIRED: bool> ApiExtractor<'a> for LenientJson<T, REQUIRED> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        Some(MetaRequest {
            description: None,
            content: vec![MetaMediaType {
                content_type: "application/json",
                schema: T::schema_ref(),
            }],
            required: REQUIRED,
        })
    }

    async fn from_request(
        _request: &'a Request,
        body: &mut RequestBody,
        _opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        Ok(Self::read(body).await?)
    }
}
