//! How clap reads a flag's value through the library's own rules: a
//! number held to its range in `spec::bounds`, a closed set of names
//! through the enum's `ValueEnum` (listed, with what each is for, in
//! `--help`) and `FromStr` (the library's sentence for a refused name).

use std::ffi::OsStr;
use std::marker::PhantomData;

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use clap::error::ErrorKind;
use clap::{Arg, Command, ValueEnum};

/// A value read by its `FromStr`, refused in clap's own style (as clap
/// reads a type it has no parser of its own for).
pub fn parsed<T: std::str::FromStr>() -> fn(&str) -> Result<T, T::Err> {
    T::from_str
}

/// A number read by `inner`, then checked by a `spec::bounds` rule: a
/// value out of range is refused in one line naming the flag, in the
/// words a spec's key gets for the same value.
pub fn bounded<P, F, U>(inner: P, check: F) -> Bounded<P, F>
where
    P: TypedValueParser,
    F: Fn(P::Value) -> Result<U, String> + Clone + Send + Sync + 'static,
{
    Bounded { inner, check }
}

#[derive(Clone)]
pub struct Bounded<P, F> {
    inner: P,
    check: F,
}

impl<P, F, U> TypedValueParser for Bounded<P, F>
where
    P: TypedValueParser,
    F: Fn(P::Value) -> Result<U, String> + Clone + Send + Sync + 'static,
    U: Clone + Send + Sync + 'static,
{
    type Value = U;

    fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<U, clap::Error> {
        let read = self.inner.parse_ref(cmd, arg, value)?;
        (self.check)(read).map_err(|why| one_line(arg, &why))
    }
}

/// How a refused name is reported.
#[derive(Clone, Copy)]
pub enum Refusal {
    /// clap's own style: the value, the flag, the library's sentence, a
    /// hint line.
    Clap,
    /// One line, `--flag: sentence`, as a bad number is refused.
    Line,
}

/// A closed set of names: clap lists `E`'s values in `--help`, and a
/// refused one gets `E::from_str`'s sentence (which may say more than
/// "not one of these": a retired name says what replaced it).
pub fn named<E>(refusal: Refusal) -> Named<E> {
    Named {
        refusal,
        enum_: PhantomData,
    }
}

#[derive(Clone)]
pub struct Named<E> {
    refusal: Refusal,
    enum_: PhantomData<fn() -> E>,
}

impl<E> TypedValueParser for Named<E>
where
    E: ValueEnum + std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    type Value = E;

    fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<E, clap::Error> {
        match self.refusal {
            Refusal::Clap => StringValueParser::new()
                .try_map(|s| s.parse::<E>())
                .parse_ref(cmd, arg, value),
            Refusal::Line => {
                let text = StringValueParser::new().parse_ref(cmd, arg, value)?;
                text.trim()
                    .parse()
                    .map_err(|why: String| one_line(arg, &why))
            }
        }
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            E::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
    }
}

/// `error: --flag: why`, one line, exit 2, as the binary reports every
/// other refused input.
fn one_line(arg: Option<&Arg>, why: &str) -> clap::Error {
    let flag = arg.map_or_else(String::new, |a| match (a.get_long(), a.get_short()) {
        (Some(long), _) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => a.get_id().to_string(),
    });
    clap::Error::raw(ErrorKind::ValueValidation, format!("{flag}: {why}\n"))
}
