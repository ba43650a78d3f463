//! `record!`: a struct read from one of the store's rows (`AnyRow`), each
//! field from the column of its name, what `#[derive(sqlx::FromRow)]`
//! would write. sqlx's derive is left out with the rest of its macros
//! (see `migrations`).
//!
//! A field marked `#[flatten]` is a record of its own read from the same
//! row; one marked `#[default]` reads as its type's default when the
//! statement selects no column of its name.

macro_rules! record {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$how:ident])? $field_vis:vis $field:ident: $ty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($field_vis $field: $ty),*
        }

        impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for $name {
            fn from_row(row: &'r sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
                Ok(Self {
                    $($field: record!(@read row, $field $(, $how)?)),*
                })
            }
        }
    };
    (@read $row:ident, $field:ident) => {
        sqlx::Row::try_get($row, stringify!($field))?
    };
    (@read $row:ident, $field:ident, flatten) => {
        sqlx::FromRow::from_row($row)?
    };
    (@read $row:ident, $field:ident, default) => {
        $crate::store::record::or_default(sqlx::Row::try_get($row, stringify!($field)))?
    };
}

/// A column the statement did not select reads as the default.
pub(super) fn or_default<T: Default>(read: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
    match read {
        Err(sqlx::Error::ColumnNotFound(_)) => Ok(T::default()),
        read => read,
    }
}
