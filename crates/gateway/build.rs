//! Release builds of the `toolbridge` binary lay its functions out in the order of
//! `functions.order` (made by `scripts/order-functions`): the code a running gateway uses sits
//! together at the front of `.text`, so fewer of the binary's pages are resident (see
//! docs/performance.md, "Memory"). Names in the file that the binary no longer has are skipped.
//!
//! Only where rustc links with its own LLD (x86_64 Linux, the default since Rust 1.90) and no
//! other linker is asked for; `TOOLBRIDGE_NO_FUNCTION_ORDER=1` turns it off.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=functions.order");
    println!("cargo:rerun-if-env-changed=TOOLBRIDGE_NO_FUNCTION_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let release = var("PROFILE") == "release";
    let lld = var("TARGET") == "x86_64-unknown-linux-gnu"
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("linker")
        && var("RUSTC_LINKER").is_empty();
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("functions.order");
    if release && lld && order.is_file() && var("TOOLBRIDGE_NO_FUNCTION_ORDER") != "1" {
        println!(
            "cargo:rustc-link-arg-bin=toolbridge=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=toolbridge=-Wl,--no-warn-symbol-ordering");
    }
}
