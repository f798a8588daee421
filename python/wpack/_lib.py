"""ctypes declarations of the wpack C API (include/wpack.h) and library lookup.

Internal module: the public API is in wpack/__init__.py and wpack/torch.py.
"""
import ctypes
import ctypes.util
import os

__all__ = ["lib", "import_lib", "remote_lib", "library_paths", "STRUCTS"]

c_u8p = ctypes.POINTER(ctypes.c_uint8)
c_u64p = ctypes.POINTER(ctypes.c_uint64)
c_dblp = ctypes.POINTER(ctypes.c_double)

MAX_RANK = 8


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p), ("name_len", ctypes.c_size_t), ("index", ctypes.c_uint64),
        ("kind", ctypes.c_int), ("dtype", ctypes.c_int), ("codec", ctypes.c_int),
        ("rank", ctypes.c_uint), ("dims", ctypes.c_uint64 * MAX_RANK),
        ("nelems", ctypes.c_uint64), ("nbytes", ctypes.c_uint64), ("offset", ctypes.c_uint64),
        ("stored_length", ctypes.c_uint64), ("checksum", ctypes.c_uint64),
        ("data", ctypes.c_void_p), ("fill", ctypes.c_void_p), ("fill_size", ctypes.c_size_t),
        ("alias_target", ctypes.c_uint64), ("chunk_size", ctypes.c_uint32),
        ("decoded_checksum", ctypes.c_uint64),
        ("reserved_ptr", ctypes.c_void_p * 2), ("reserved", ctypes.c_uint64 * 4),
    ]


class Info(ctypes.Structure):
    _fields_ = [
        ("format_major", ctypes.c_uint16), ("format_minor", ctypes.c_uint16),
        ("alignment", ctypes.c_uint32),
        ("required_features", ctypes.c_uint64), ("optional_features", ctypes.c_uint64),
        ("generation", ctypes.c_uint64), ("file_length", ctypes.c_uint64),
        ("data_offset", ctypes.c_uint64), ("data_length", ctypes.c_uint64),
        ("index_offset", ctypes.c_uint64), ("index_length", ctypes.c_uint64),
        ("index_checksum", ctypes.c_uint64), ("entry_count", ctypes.c_uint64),
        ("metadata_count", ctypes.c_uint64), ("namemap_count", ctypes.c_uint64),
        ("stats_count", ctypes.c_uint64), ("block_dtype_count", ctypes.c_uint64),
        ("recovered", ctypes.c_int),
        ("reserved_ptr", ctypes.c_void_p * 2), ("reserved", ctypes.c_uint64 * 4),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("key", ctypes.c_char_p), ("kind", ctypes.c_int), ("granularity", ctypes.c_int),
        ("axis", ctypes.c_uint32), ("channels", ctypes.c_uint32), ("count", ctypes.c_uint64),
        ("min", ctypes.c_double), ("max", ctypes.c_double), ("absmax", ctypes.c_double),
        ("mean", ctypes.c_double), ("variance", ctypes.c_double),
        ("hist_bins", ctypes.c_uint32), ("percentile_count", ctypes.c_uint32),
        ("priv_", ctypes.c_void_p * 3),
        ("overall_min", ctypes.c_double), ("overall_max", ctypes.c_double),
        ("overall_absmax", ctypes.c_double), ("overall_mean", ctypes.c_double),
        ("overall_variance", ctypes.c_double),
        ("reserved_ptr", ctypes.c_void_p * 2), ("reserved", ctypes.c_uint64 * 4),
    ]


class StatsIn(ctypes.Structure):
    _fields_ = [
        ("key", ctypes.c_char_p), ("kind", ctypes.c_int), ("granularity", ctypes.c_int),
        ("axis", ctypes.c_uint32), ("channels", ctypes.c_uint32), ("count", ctypes.c_uint64),
        ("min", c_dblp), ("max", c_dblp), ("absmax", c_dblp), ("mean", c_dblp),
        ("variance", c_dblp),
        ("hist_bins", ctypes.c_uint32), ("hist_edges", c_dblp), ("hist_counts", c_u64p),
        ("percentile_count", ctypes.c_uint32), ("percentiles", c_dblp),
        ("reserved_ptr", ctypes.c_void_p * 2), ("reserved", ctypes.c_uint64 * 4),
    ]


class Meta(ctypes.Structure):
    _fields_ = [
        ("key", ctypes.c_char_p), ("type", ctypes.c_int), ("elem_type", ctypes.c_int),
        ("count", ctypes.c_uint64), ("i64", ctypes.c_int64), ("f64", ctypes.c_double),
        ("boolean", ctypes.c_int), ("str", ctypes.c_void_p), ("bytes", ctypes.c_void_p),
        ("priv_", ctypes.c_void_p),
        ("reserved_ptr", ctypes.c_void_p * 2), ("reserved", ctypes.c_uint64 * 4),
    ]


class WriterOptions(ctypes.Structure):
    _fields_ = [
        ("alignment", ctypes.c_uint32), ("weight_stats", ctypes.c_int),
        ("histogram_bins", ctypes.c_uint32), ("compress_level", ctypes.c_int),
        ("compress_chunk", ctypes.c_uint32), ("compress_min", ctypes.c_uint64),
        ("compress_min_saving", ctypes.c_uint32), ("shard_size", ctypes.c_uint64),
        ("max_data_bytes", ctypes.c_uint64), ("portable_stats", ctypes.c_int),
        ("no_copy_range", ctypes.c_int), ("executor", ctypes.c_void_p),
        ("no_sync", ctypes.c_int),
        ("reserved_ptr", ctypes.c_void_p * 4), ("chunk_sums", ctypes.c_uint64),
        ("reserved", ctypes.c_uint64 * 3),
    ]


# include/wpack_import.h. Every struct here mirrors its C twin field for
# field, same names (tests/python/test_py_layout.py compares sizeof and each
# offsetof with a C program compiled against the headers).
ImportProgress = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64)
ImportWarn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
ImportItemFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class ImportOptions(ctypes.Structure):
    _fields_ = [
        ("prefix", ctypes.c_char_p), ("key", ctypes.c_char_p), ("name", ctypes.c_char_p),
        ("cast", ctypes.c_int),
        ("only", ctypes.POINTER(ctypes.c_char_p)), ("only_count", ctypes.c_size_t),
        ("weight_stats", ctypes.c_int), ("follow_links", ctypes.c_int),
        ("max_ratio", ctypes.c_uint32), ("max_total", ctypes.c_uint64),
        ("stats_file", ctypes.c_char_p),
        ("name_map_other", ctypes.POINTER(ctypes.c_char_p)),
        ("name_map_entry", ctypes.POINTER(ctypes.c_char_p)),
        ("name_map_count", ctypes.c_size_t),
        ("progress", ImportProgress), ("progress_user", ctypes.c_void_p),
        ("warn", ImportWarn), ("warn_user", ctypes.c_void_p),
        ("err", ctypes.c_void_p), ("err_size", ctypes.c_size_t),
        ("temp_dir", ctypes.c_char_p), ("executor", ctypes.c_void_p),
        ("within", ctypes.c_char_p),
        ("reserved_ptr", ctypes.c_void_p * 2), ("reserved", ctypes.c_uint64 * 2),
        ("keep_observers", ctypes.c_int), ("portable_stats", ctypes.c_int),
    ]


class ImportItem(ctypes.Structure):
    _fields_ = [
        ("path", ctypes.c_char_p), ("name", ctypes.c_char_p), ("kind", ctypes.c_int),
        ("bytes", ctypes.c_uint64),
    ]


# include/wpack_remote.h
RemoteOnBytes = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64)


class RemoteOptions(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint), ("connections", ctypes.c_uint),
        ("chunk_size", ctypes.c_uint64), ("retries", ctypes.c_uint),
        ("retry_delay_ms", ctypes.c_uint), ("timeout_s", ctypes.c_uint),
        ("max_bytes_per_s", ctypes.c_uint64), ("follow_redirects", ctypes.c_int),
        ("s3_region", ctypes.c_char_p), ("s3_endpoint", ctypes.c_char_p),
        ("access_key", ctypes.c_char_p), ("secret_key", ctypes.c_char_p),
        ("session_token", ctypes.c_char_p), ("ca_file", ctypes.c_char_p),
        ("on_bytes", RemoteOnBytes), ("on_bytes_user", ctypes.c_void_p),
        ("cache_dir", ctypes.c_char_p), ("cache_max_bytes", ctypes.c_uint64),
        ("proxy", ctypes.c_char_p), ("no_proxy", ctypes.c_char_p),
        ("reserved_ptr", ctypes.c_void_p * 2), ("reserved", ctypes.c_uint64 * 4),
    ]


# (C type name, ctypes mirror) for the layout test.
STRUCTS = {}  # filled at the end of this module


class Bytes(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t)]


VP = ctypes.c_void_p
I = ctypes.c_int
U64 = ctypes.c_uint64
CP = ctypes.c_char_p
SZ = ctypes.c_size_t

# name: (restype, argtypes)
_PROTOS = {
    "wpack_version_number": (ctypes.c_uint, []),
    "wpack_version_string": (CP, []),
    "wpack_error_name": (CP, [I]),
    "wpack_error_describe": (CP, [I]),
    "wpack_text_escape": (SZ, [ctypes.c_char_p, SZ, ctypes.c_char_p, SZ]),
    "wpack_dtype_size": (SZ, [I]),
    "wpack_dtype_name": (CP, [I]),
    "wpack_open_file": (I, [ctypes.POINTER(VP), CP, ctypes.c_uint]),
    "wpack_close": (None, [VP]),
    "wpack_errcode": (I, [VP]),
    "wpack_errmsg": (CP, [VP]),
    "wpack_errmsg_copy": (I, [VP, ctypes.c_char_p, SZ]),
    "wpack_get_info": (None, [VP, ctypes.POINTER(Info)]),
    "wpack_count": (U64, [VP]),
    "wpack_tensor_at": (I, [VP, U64, ctypes.POINTER(Tensor)]),
    "wpack_find": (I, [VP, CP, ctypes.POINTER(Tensor)]),
    "wpack_prefix_range": (I, [VP, CP, c_u64p, c_u64p]),
    "wpack_shard_count": (ctypes.c_uint32, [VP]),
    "wpack_tensor_view": (I, [VP, U64, ctypes.POINTER(VP), c_u64p]),
    "wpack_tensor_chunk_size": (U64, [VP, U64]),
    "wpack_tensor_view_range": (I, [VP, U64, U64, U64, ctypes.POINTER(VP)]),
    "wpack_read_ex": (I, [VP, U64, U64, VP, SZ, ctypes.c_uint]),
    "wpack_verify_once": (I, [VP, U64]),
    "wpack_read_plan": (I, [VP, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]),
    "wpack_block_dtype_at": (I, [VP, U64, ctypes.POINTER(CP), ctypes.POINTER(ctypes.c_uint32),
                                 ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(VP), c_u64p]),
    "wpack_meta_count": (U64, [VP]),
    "wpack_meta_at": (I, [VP, U64, ctypes.POINTER(Meta)]),
    "wpack_meta_elem": (I, [VP, ctypes.POINTER(Meta), U64, ctypes.POINTER(Meta)]),
    "wpack_namemap_count": (U64, [VP]),
    "wpack_namemap_at": (I, [VP, U64, ctypes.POINTER(CP), c_u64p]),
    "wpack_stats_count": (U64, [VP]),
    "wpack_stats_at": (I, [VP, U64, ctypes.POINTER(Stats)]),
    "wpack_stats_find": (I, [VP, CP, I, ctypes.POINTER(Stats)]),
    "wpack_stats_value": (ctypes.c_double, [ctypes.POINTER(Stats), I, ctypes.c_uint32]),
    "wpack_stats_bin": (None, [ctypes.POINTER(Stats), ctypes.c_uint32, c_dblp, c_dblp, c_u64p]),
    "wpack_stats_percentile": (None, [ctypes.POINTER(Stats), ctypes.c_uint32, c_dblp, c_dblp]),
    "wpack_stats_values": (I, [ctypes.POINTER(Stats), c_dblp, U64]),
    "wpack_stats_histogram": (I, [ctypes.POINTER(Stats), c_dblp, U64, c_u64p, U64]),
    "wpack_stats_percentiles": (I, [ctypes.POINTER(Stats), c_dblp, U64]),
    "wpack_writer_options_init": (None, [ctypes.POINTER(WriterOptions)]),
    "wpack_writer_open": (I, [ctypes.POINTER(VP), CP, ctypes.POINTER(WriterOptions)]),
    "wpack_writer_errcode": (I, [VP]),
    "wpack_writer_errmsg": (CP, [VP]),
    "wpack_writer_begin_tensor": (I, [VP, CP, I, ctypes.c_uint, c_u64p]),
    "wpack_writer_write": (I, [VP, VP, SZ]),
    "wpack_writer_end_tensor": (I, [VP]),
    "wpack_writer_add_splat": (I, [VP, CP, I, ctypes.c_uint, c_u64p, VP, SZ]),
    "wpack_writer_add_alias": (I, [VP, CP, CP]),
    "wpack_writer_set_string": (I, [VP, CP, CP]),
    "wpack_writer_set_i64": (I, [VP, CP, ctypes.c_int64]),
    "wpack_writer_set_f64": (I, [VP, CP, ctypes.c_double]),
    "wpack_writer_set_bool": (I, [VP, CP, I]),
    "wpack_writer_set_bytes": (I, [VP, CP, VP, SZ]),
    "wpack_writer_set_array": (I, [VP, CP, I, U64, VP]),
    "wpack_writer_add_name": (I, [VP, CP, CP]),
    "wpack_writer_add_stats": (I, [VP, ctypes.POINTER(StatsIn)]),
    "wpack_writer_count": (U64, [VP]),
    "wpack_writer_finish": (I, [VP, CP, SZ]),
    "wpack_writer_abort": (None, [VP]),
    "wpack_update_add_stats": (I, [CP, ctypes.POINTER(StatsIn), SZ, CP, SZ]),
    "wpack_update_begin": (I, [ctypes.POINTER(VP), CP, ctypes.c_uint, CP, SZ]),
    "wpack_update_abort": (None, [VP]),
}


def _declare(dll, protos):
    for name, (res, args) in protos.items():
        fn = getattr(dll, name)
        fn.restype = res
        fn.argtypes = args


def _candidates(base):
    """Where to look for lib<base>.so, in order (see the README, "Python")."""
    out = []
    env = os.environ.get("WPACK_LIBRARY_PATH")
    if env:
        for d in env.split(os.pathsep):
            if d:
                out.append(os.path.join(d, "lib%s.so.0" % base))
    here = os.path.dirname(os.path.abspath(__file__))
    # In the source tree: python/wpack/ -> build/
    out.append(os.path.join(here, "..", "..", "build", "lib%s.so.0" % base))
    # Installed by `make install PREFIX=P`: _install.py names P/lib.
    try:
        from ._install import LIBDIR
        out.append(os.path.join(LIBDIR, "lib%s.so.0" % base))
    except ImportError:
        pass
    # Or P/lib/python3/dist-packages/wpack -> P/lib (pip install next to the libraries)
    out.append(os.path.join(here, "..", "..", "..", "lib%s.so.0" % base))
    found = ctypes.util.find_library(base)
    if found:
        out.append(found)
    out.append("lib%s.so.0" % base)
    return out


def _load(base, required_symbol, candidates=None):
    tried = []
    for path in candidates or _candidates(base):
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            dll = ctypes.CDLL(os.path.normpath(path) if os.sep in path else path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        if hasattr(dll, required_symbol):
            return dll, os.path.normpath(path) if os.sep in path else path
        tried.append(path + " (no %s)" % required_symbol)
    raise OSError("wpack: cannot load lib%s.so: tried %s; build it with `make` or set "
                  "WPACK_LIBRARY_PATH to the directory that holds it" % (base, "; ".join(tried)))


lib, lib_path = _load("wpack", "wpack_open_file")
_declare(lib, _PROTOS)

_import_state = {}


def import_lib():
    """libwpack-import, loaded on first use (wpack.pack); raises OSError if missing."""
    if "dll" not in _import_state:
        # From libwpack's own directory when it came from one: never pair a
        # libwpack with another build's libwpack-import.
        where = [os.path.join(os.path.dirname(lib_path), "libwpack-import.so.0")] \
            if os.sep in lib_path else None
        dll, path = _load("wpack-import", "wpack_import_file", where)
        _declare(dll, _IMPORT_PROTOS)
        _import_state["dll"] = dll
        _import_state["path"] = path
    return _import_state["dll"]


class Executor(ctypes.Structure):
    """wpack_executor (wpack.h): filled by wpack_pool_executor (reserved
    fields zero: wpack_set_executor refuses any other value)."""
    _fields_ = [("run", ctypes.c_void_p), ("self", ctypes.c_void_p),
                ("threads", ctypes.c_uint),
                ("reserved_ptr", ctypes.c_void_p * 2), ("reserved", ctypes.c_uint64 * 2)]


_dense_state = {}


def dense_lib():
    """libwpack-dense (its thread pool), loaded on first use (threads=N)."""
    if "dll" not in _dense_state:
        where = [os.path.join(os.path.dirname(lib_path), "libwpack-dense.so.0")] \
            if os.sep in lib_path else None
        dll, _path = _load("wpack-dense", "wpack_pool_create", where)
        _declare(dll, {
            "wpack_pool_create": (VP, [ctypes.c_uint, ctypes.c_long]),
            "wpack_pool_destroy": (None, [VP]),
            "wpack_pool_executor": (None, [VP, ctypes.POINTER(Executor)]),
        })
        _dense_state["dll"] = dll
    return _dense_state["dll"]


_IMPORT_PROTOS = {
    "wpack_import_options_init": (None, [ctypes.POINTER(ImportOptions)]),
    "wpack_import_file": (I, [VP, CP, ctypes.POINTER(ImportOptions)]),
    "wpack_import_open": (I, [ctypes.POINTER(VP), VP]),
    "wpack_import_add": (I, [VP, CP, ctypes.POINTER(ImportOptions)]),
    "wpack_import_errmsg": (CP, [VP]),
    "wpack_import_close": (None, [VP]),
    "wpack_import_detect": (I, [CP, CP, SZ]),
    "wpack_import_kind_name": (CP, [I]),
    "wpack_import_list": (I, [CP, ctypes.POINTER(ImportOptions), ImportItemFn, VP]),
}

_REMOTE_PROTOS = {
    "wpack_remote_options_init": (None, [ctypes.POINTER(RemoteOptions)]),
    "wpack_remote_is_url": (I, [CP]),
    "wpack_remote_has_scheme": (I, [CP]),
    "wpack_open_url": (I, [ctypes.POINTER(VP), CP, ctypes.POINTER(RemoteOptions)]),
    "wpack_remote_shown_url": (VP, [CP]),
}

_libc = ctypes.CDLL(None)
_libc.free.argtypes = [VP]


def shown_url(url):
    """url as the library shows it (its password, query values and
    fragment as "***"): wpack_remote_shown_url, so that Python's own
    messages hide them too."""
    p = remote_lib().wpack_remote_shown_url(url.encode("utf-8", "surrogateescape"))
    if not p:
        return "<URL>"
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        _libc.free(p)

_remote_state = {}


def remote_lib():
    """libwpack-remote, loaded on first use (safe_open of a URL); raises
    OSError if missing. Taken from libwpack's directory, like import_lib."""
    if "dll" not in _remote_state:
        where = [os.path.join(os.path.dirname(lib_path), "libwpack-remote.so.0")] \
            if os.sep in lib_path else None
        dll, path = _load("wpack-remote", "wpack_open_url", where)
        _declare(dll, _REMOTE_PROTOS)
        _remote_state["dll"] = dll
        _remote_state["path"] = path
    return _remote_state["dll"]


def library_paths():
    """The files the C libraries were loaded from (libwpack; libwpack-import once used)."""
    out = {"wpack": lib_path}
    if "path" in _import_state:
        out["wpack-import"] = _import_state["path"]
    if "path" in _remote_state:
        out["wpack-remote"] = _remote_state["path"]
    return out


STRUCTS.update({
    "wpack_tensor": Tensor, "wpack_info": Info, "wpack_stats": Stats,
    "wpack_stats_in": StatsIn, "wpack_meta": Meta, "wpack_writer_options": WriterOptions,
    "wpack_import_options": ImportOptions, "wpack_import_item": ImportItem,
    "wpack_remote_options": RemoteOptions, "wpack_bytes": Bytes, "wpack_executor": Executor,
})
