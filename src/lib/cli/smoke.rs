//! Placeholder: filled in by its own issue.

use clap::Args;

use super::Ctx;
use crate::error::{Error, Result};

/// Arguments (placeholder).
#[derive(Debug, Args)]
pub struct SmokeArgs {}

/// Runs the command (placeholder).
pub async fn run(_args: SmokeArgs, _ctx: &mut Ctx<'_>) -> Result<u8> {
    Err(Error::invalid("smoke", "not implemented yet"))
}
