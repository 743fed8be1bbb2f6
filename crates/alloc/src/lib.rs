//! [`Mimalloc`]: the `toolbridge` binary's global allocator.
//!
//! mimalloc, called the way Rust's own system allocator calls `malloc`: a layout whose
//! alignment mimalloc's plain `mi_malloc` already gives (at most 16 bytes, and no more than the
//! size) goes to `mi_malloc`, `mi_zalloc` and `mi_realloc`; only a larger alignment takes the
//! aligned entry points.
//!
//! Why not the `mimalloc` crate's `MiMalloc`: it sends every allocation through
//! `mi_malloc_aligned`, whose fast path is a longer one, and whose slow path (no free block of
//! the right alignment in the current page) over-allocates by the alignment. Measured with
//! `scripts/bench-instructions` (see docs/performance.md, "The binary"): a request makes about
//! 240 allocations, 64 instructions each through `mi_malloc_aligned`.
//!
//! Why mimalloc's own guarantee suffices: `mi_malloc` returns blocks aligned to
//! `MI_MAX_ALIGN_SIZE` (16) when the size is at least 16, and to the size's own power of two
//! below that, as C's `malloc` must; a Rust layout's size is a multiple of its alignment, so
//! `align <= size` together with `align <= 16` is always met by a plain block.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment `mi_malloc` gives every block of at least this size (`MI_MAX_ALIGN_SIZE`).
const PLAIN_ALIGN: usize = 16;

/// mimalloc as the global allocator (`#[global_allocator] static A: Mimalloc = Mimalloc;`).
pub struct Mimalloc;

/// Whether a plain (unaligned) mimalloc block of `size` bytes meets `align`.
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY (for the whole impl): every pointer handed to mimalloc here came from mimalloc (the
// global allocator is this one), and each call passes the size and alignment the caller's
// layout promises, as `GlobalAlloc` requires.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: see the impl.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(layout.align(), new_size) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block, plain or aligned, fresh, zeroed or grown, meets its layout's alignment,
    /// and a grown or shrunk block keeps its bytes.
    #[test]
    fn blocks_meet_their_alignment_and_keep_their_bytes() {
        let a = Mimalloc;
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1usize, 3, 8, 15, 16, 24, 40, 100, 1000, 70_000] {
                let size = size.next_multiple_of(align);
                let Ok(layout) = Layout::from_size_align(size, align) else {
                    continue;
                };
                // SAFETY: non-zero sizes; each block is freed with its own layout.
                #[allow(unsafe_code)]
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "alloc {size}/{align}");
                    p.write_bytes(7, size);
                    let grown = size * 3;
                    let q = a.realloc(p, layout, grown);
                    assert_eq!(q as usize % align, 0, "realloc {grown}/{align}");
                    assert!(std::slice::from_raw_parts(q, size).iter().all(|&b| b == 7));
                    let shrunk = align.max(size / 2).next_multiple_of(align);
                    let grown_layout = Layout::from_size_align(grown, align).unwrap_or(layout);
                    let r = a.realloc(q, grown_layout, shrunk);
                    assert_eq!(r as usize % align, 0, "shrink {shrunk}/{align}");
                    assert!(
                        std::slice::from_raw_parts(r, shrunk)
                            .iter()
                            .all(|&b| b == 7)
                    );
                    a.dealloc(r, Layout::from_size_align(shrunk, align).unwrap_or(layout));
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0, "zalloc {size}/{align}");
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
