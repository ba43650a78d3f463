//! A nullable `DOUBLE PRECISION` parameter that PostgreSQL always gets as
//! one.
//!
//! sqlx 0.8's `Any` driver hands a `None::<f64>` on as a NULL of type
//! `real` (float4): its table of typed NULLs has `f32` and `f64` swapped
//! (`AnyArguments::convert_to`; fixed upstream after 0.8.6). PostgreSQL
//! prepares a statement once per connection with the parameter types of
//! its first execution, so a statement first run with a NULL there then
//! refuses every later 8-byte value: "incorrect binary data format in bind
//! parameter N", a batch failed for nothing. Binding through [`Real`]
//! declares `double precision` either way. SQLite types nothing and is
//! unaffected.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Any, Database, Encode, Type};

/// `Option<f64>` as a query parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Real(pub Option<f64>);

impl Type<Any> for Real {
    fn type_info() -> <Any as Database>::TypeInfo {
        <f64 as Type<Any>>::type_info()
    }
}

impl<'q> Encode<'q, Any> for Real {
    fn encode_by_ref(
        &self,
        buf: &mut <Any as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        match self.0 {
            Some(value) => <f64 as Encode<'q, Any>>::encode_by_ref(&value, buf),
            // The NULL the swapped table turns into PostgreSQL's `double
            // precision` (and SQLite's NULL).
            None => <Option<f32> as Encode<'q, Any>>::encode_by_ref(&None, buf),
        }
    }
}
