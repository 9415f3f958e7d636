"""Give freed heap memory back to the OS after the big per-example arrays are built.

Once a large array is freed, glibc raises its mmap threshold (up to 32 MiB), so the numpy
temporaries of index building and batching come from the heap; freed, they leave holes under
the arrays that stay alive, which glibc keeps and RSS counts (~120 MB after indexing a 20M-line
data-bin, docs/BENCHMARKS.md). ``malloc_trim(0)`` returns every free page of them. A no-op
where the C library has no ``malloc_trim`` (not glibc).
"""
import ctypes


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _malloc_trim()


def release_freed_memory():
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
