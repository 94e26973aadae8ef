//! Temporary stub; replaced by the generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    Small,
    Medium,
    Large,
}
pub struct GeneratedFile {
    pub path: std::path::PathBuf,
    pub workspace_id: String,
    pub api_key: String,
    pub bytes: u64,
    pub records: u64,
}
pub fn generate(
    _out: &std::path::Path,
    _scale: Scale,
    _seed: u64,
) -> std::io::Result<Vec<GeneratedFile>> {
    Ok(Vec::new())
}
