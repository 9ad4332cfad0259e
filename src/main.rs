//! The `trajwiki` command line.
fn main() {
    eprintln!("trajwiki: the command line is being assembled; see ARCHITECTURE.md");
    std::process::exit(1);
}
