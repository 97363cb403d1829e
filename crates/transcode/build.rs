//! With the `x264` feature: compiles `csrc/x264_shim.c` against the system's libx264 and links
//! it. Without the feature: nothing (cargo alone builds the crate).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "x264")]
    x264::build();
}

#[cfg(feature = "x264")]
mod x264 {
    use std::path::{Path, PathBuf};

    /// What a user reads when the library is missing: what to install, and how to do without.
    const MISSING: &str = "switchyard-transcode's `x264` feature needs libx264 and its header (x264.h), and neither \
        pkg-config nor the usual include folders found them: install Debian's libx264-dev (`.ci/install-x264`, or \
        `apt-get install libx264-dev`), or build without `--features x264` (the OpenH264 encoder needs nothing)";

    pub(super) fn build() {
        println!("cargo:rerun-if-changed=csrc/x264_shim.c");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        let includes: Vec<PathBuf> = match pkg_config::Config::new().atleast_version("0.148").probe("x264") {
            // pkg-config printed the link lines itself.
            Ok(lib) => lib.include_paths,
            Err(_)
                if Path::new("/usr/include/x264.h").is_file() || Path::new("/usr/local/include/x264.h").is_file() =>
            {
                // No pkg-config program (or no x264.pc), but the header is where compilers look.
                println!("cargo:rustc-link-lib=x264");
                Vec::new()
            }
            Err(e) => {
                eprintln!("error: {MISSING}");
                let said = e.to_string();
                if let Some(line) = said.lines().map(str::trim).find(|l| !l.is_empty()) {
                    eprintln!("(pkg-config said: {line})");
                }
                std::process::exit(1);
            }
        };
        let mut shim = cc::Build::new();
        shim.file("csrc/x264_shim.c").warnings(true).extra_warnings(true);
        for dir in includes {
            shim.include(dir);
        }
        shim.compile("switchyard_x264_shim");
    }
}
