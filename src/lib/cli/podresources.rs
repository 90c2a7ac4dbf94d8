//! Placeholder: filled in by its own issue.

use clap::Subcommand;

use super::Ctx;
use crate::error::{Error, Result};

/// `dpctl podresources ...` (placeholder).
#[derive(Debug, Subcommand)]
pub enum PodResourcesCommand {
    /// List (placeholder).
    List {},
}

/// Runs the command (placeholder).
pub async fn run(_cmd: PodResourcesCommand, _ctx: &mut Ctx<'_>) -> Result<u8> {
    Err(Error::invalid("podresources", "not implemented yet"))
}
