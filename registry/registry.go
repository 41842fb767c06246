package registry

// Spec describes one framework's kernel, JIT or model cache.
type Spec struct {
	// Name is the cache's short name in records and reports ("triton").
	Name string
	// Framework is the library that owns it ("Triton").
	Framework string
	// Compiles says a miss is filled by compiling; false for caches of
	// downloaded weights, whose misses are downloads.
	Compiles bool
	// Paths are the candidate locations, highest precedence first: the
	// first whose variables are all set (non-empty) in the traced
	// process's environment is the root. Syntax:
	//   $VAR    an environment variable of the traced process
	//   ~       its HOME (else the home of its uid)
	//   {tmp}   Python's tempfile.gettempdir(): TMPDIR, TEMP, TMP, /tmp
	//   {user}  getpass.getuser(): LOGNAME, USER, LNAME, USERNAME, then
	//           the name of the process's uid
	//   **/D    any directory named D (D may have several components):
	//           the cache is every such directory, wherever it is
	// A relative result is taken relative to the process's cwd.
	Paths []string
	// Also are further locations used at the same time as the one Paths
	// picks, each when its variables are set (Triton's directory inside
	// Inductor's, which Inductor sets for its own process).
	Also []string
	// EntryDepth is how many path components below the root name one
	// entry (a Triton key directory: 1); 0 means every file is an entry.
	EntryDepth int
	// Entries are globs on the base name of files that are entries, for
	// EntryDepth 0 (Python: *.pyc); empty means every file.
	Entries []string
	// Temp are globs on any path component below the root that mark a
	// file being written (a miss being filled): never an entry.
	Temp []string
	// Ignore are globs on any path component below the root for
	// bookkeeping files (locks, access stamps, indexes): neither lookups
	// nor entries, even when written on a hit.
	Ignore []string
	// Hit is the hit signature, in words.
	Hit string
	// Key says what the framework puts in an entry's key, so that a
	// root whose entries no lookup matched can say what may differ.
	Key string
	// Switches are environment settings that disable or bypass the cache.
	Switches []Switch
	// Limit names the variable holding the cache's size limit in bytes.
	Limit string
	// Uses are globs on the base names of files a traced process opened
	// or executed that show the framework at work: a cache a switch
	// turned off is reported only then (it has no activity of its own).
	Uses []string
	// Packages are Python packages (directory names) whose import by a
	// traced process shows the framework at work: a pure-Python
	// framework maps no library of its own. Like Uses, they attach the
	// path-syscall probes.
	Packages []string
	// PageCacheEvidence says the cache's hits, misses and entries are
	// told from the page-cache probes while no path syscall is traced
	// (Python's bytecode: see pythonFile), so its use alone does not
	// attach the path-syscall probes.
	PageCacheEvidence bool
	// SeenWithoutPathSyscalls says every rule the cache's counts need is
	// seen by a source that costs the rest of the machine nothing: page
	// cache records, the network sensor, compiler execs (see
	// docs/sources.md). Its use alone does not attach the path-syscall
	// probes, whose cost lands on every task of the machine.
	SeenWithoutPathSyscalls bool
	// Source is where the layout was read.
	Source string
}

// Switch is an environment setting that disables or bypasses a cache.
type Switch struct {
	Env string
	// Values that trigger it; empty means any non-empty value.
	Values []string
	// Effect says what it does, in words.
	Effect string
	// Offline: the switch keeps the next run off the network rather than
	// disabling the cache; a file the cache lacks then fails the run.
	Offline bool
}

// hubTrue are the values huggingface_hub reads as true (_is_true:
// the value upper-cased in 1, ON, YES, TRUE), as they are written.
var hubTrue = []string{"1", "ON", "YES", "TRUE", "on", "yes", "true", "On", "Yes", "True"}

// Registry is every known cache; docs/cache-registry.md describes each
// one with the source it was read from.
var Registry = []Spec{
	{
		Name: "cuda", Framework: "CUDA driver JIT (ComputeCache)", Compiles: true,
		Key:      "the PTX, the GPU architecture and the driver version",
		Paths:    []string{"$CUDA_CACHE_PATH", "~/.nv/ComputeCache"},
		Ignore:   []string{"index"}, // layout unverified (closed source)
		Hit:      "an existing entry opened for reading (layout unverified)",
		Switches: []Switch{{Env: "CUDA_CACHE_DISABLE", Values: []string{"1"}, Effect: "the driver cache is off: every PTX is JIT-compiled on each run"}, {Env: "CUDA_FORCE_PTX_JIT", Values: []string{"1"}, Effect: "embedded SASS is ignored: every kernel is JIT-compiled from PTX"}},
		Limit:    "CUDA_CACHE_MAXSIZE",
		Uses:     []string{"libcuda.so*"},
		Source:   "CUDA programming guide, environment variables appendix",
	},
	{
		Name: "triton", Framework: "Triton", Compiles: true,
		Key:        "the kernel source, the Triton version, the GPU target and the compile options",
		Paths:      []string{"$TRITON_CACHE_DIR", "$TRITON_HOME/.triton/cache", "~/.triton/cache"},
		Also:       []string{"$TORCHINDUCTOR_CACHE_DIR/triton", "{tmp}/torchinductor_{user}/triton"},
		EntryDepth: 1,
		Temp:       []string{"tmp.pid_*", "*.tmp.pid_*"},
		Hit:        "mkdir of the key directory fails with EEXIST; __grp__*.json, .json, .cubin read",
		Switches:   []Switch{{Env: "TRITON_ALWAYS_COMPILE", Values: []string{"1", "true", "True"}, Effect: "the cache is bypassed: every kernel is compiled"}},
		Uses:       []string{"libtriton.so*"},
		Packages:   []string{"triton"},
		Source:     "python/triton/knobs.py, runtime/cache.py (FileCacheManager)",
	},
	{
		Name: "inductor", Framework: "PyTorch Inductor", Compiles: true,
		Key:      "the graph, the torch version, the GPU and the Inductor config",
		Paths:    []string{"$TORCHINDUCTOR_CACHE_DIR", "{tmp}/torchinductor_{user}"},
		Temp:     []string{".*.tmp", "*.tmp"},
		Ignore:   []string{"locks", "*.lock"},
		Hit:      "key directory listed, entries opened for reading",
		Switches: []Switch{{Env: "TORCHINDUCTOR_FORCE_DISABLE_CACHES", Values: []string{"1"}, Effect: "Inductor's caches are off: every graph is compiled"}},
		Uses:     []string{"libtorch_python.so*"},
		Packages: []string{"torch"},
		Source:   "torch/_inductor/runtime/cache_dir_utils.py, codecache.py (write_atomic), config.py",
	},
	{
		Name: "torch_kernels", Framework: "PyTorch NVRTC kernels", Compiles: true,
		Paths:    []string{"$PYTORCH_KERNEL_CACHE_PATH", "$XDG_CACHE_HOME/torch/kernels", "~/.cache/torch/kernels"},
		Temp:     []string{"*_tmp_[0-9]*"},
		Hit:      "one open of the kernel file",
		Switches: []Switch{{Env: "USE_PYTORCH_KERNEL_CACHE", Values: []string{"0"}, Effect: "the kernel cache is off: NVRTC compiles on each run"}},
		Uses:     []string{"libtorch_cuda.so*", "libnvrtc*"},
		Source:   "aten/src/ATen/native/cuda/jit_utils.cpp",
	},
	{
		Name: "torch_extensions", Framework: "torch.utils.cpp_extension", Compiles: true,
		Key:                     "the extension's name, sources and build flags",
		Paths:                   []string{"$TORCH_EXTENSIONS_DIR", "$XDG_CACHE_HOME/torch_extensions", "~/.cache/torch_extensions"},
		EntryDepth:              2,
		Ignore:                  []string{"lock", "build.ninja", ".ninja_log", ".ninja_deps"},
		Hit:                     "ninja finds nothing to do; <name>.so opened for reading",
		Packages:                []string{"torch"},
		SeenWithoutPathSyscalls: true,
		Source:                  "torch/utils/cpp_extension.py, file_baton.py",
	},
	{
		Name: "huggingface", Framework: "Hugging Face hub (weights)",
		Paths:  []string{"$HF_HUB_CACHE", "$HUGGINGFACE_HUB_CACHE", "$HF_HOME/hub", "$XDG_CACHE_HOME/huggingface/hub", "~/.cache/huggingface/hub"},
		Temp:   []string{"*.incomplete"},
		Ignore: []string{".locks", "refs"},
		Hit:    "refs read, snapshot symlink opened",
		// huggingface_hub reads TRANSFORMERS_OFFLINE too (constants.py:
		// HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE).
		Switches: []Switch{
			{Env: "HF_HUB_OFFLINE", Values: hubTrue, Offline: true, Effect: "offline: a rerun cannot download, so a file missing from the cache fails the run"},
			{Env: "TRANSFORMERS_OFFLINE", Values: hubTrue, Offline: true, Effect: "offline: a rerun cannot download, so a file missing from the cache fails the run"},
		},
		Packages:                []string{"huggingface_hub", "transformers", "diffusers"},
		SeenWithoutPathSyscalls: true,
		Source:                  "huggingface_hub/constants.py, file_download.py",
	},
	{
		// torch.hub: download_url_to_file writes a temporary file beside
		// the destination (1.13: tempfile's tmpXXXXXXXX; 2.x:
		// <name>.<uuid>.partial) and moves it into checkpoints/.
		Name: "torch_hub", Framework: "torch.hub (weights)",
		Paths:                   []string{"$TORCH_HOME/hub", "$XDG_CACHE_HOME/torch/hub", "~/.cache/torch/hub"},
		Temp:                    []string{"tmp*", "*.partial"},
		Hit:                     "checkpoints/<file> found (stat) and read",
		SeenWithoutPathSyscalls: true,
		Source:                  "torch/hub.py (get_dir, _get_torch_home, download_url_to_file, load_state_dict_from_url)",
	},
	{
		// pip keeps each response it may reuse in its HTTP cache (the
		// response and its body in one file; from 23.3 the body beside
		// it as <key>.body), written to an adjacent temporary name and
		// replaced, while the install itself received the wheel into a
		// temporary file it deletes: the cache's copy is what a rerun
		// reads instead of downloading.
		Name: "pip", Framework: "pip packages (weights)",
		Key:    "the file's URL",
		Paths:  []string{"$PIP_CACHE_DIR", "$XDG_CACHE_HOME/pip", "~/.cache/pip"},
		Temp:   []string{"*.tmp"},
		Ignore: []string{"selfcheck"},
		Hit:    "the URL's cached response read: no request sent",
		Switches: []Switch{
			// pip turns its cache off for any value, "false" included.
			{Env: "PIP_NO_CACHE_DIR", Effect: "pip keeps nothing it downloads: every install downloads every package again"},
		},
		Packages:                []string{"pip"},
		SeenWithoutPathSyscalls: true,
		Source:                  "pip/_internal/network/cache.py (SafeFileCache), utils/filesystem.py (adjacent_tmp_file), cli/cmdoptions.py (--no-cache-dir)",
	},
	{
		// tensorflow_hub: atomic_download writes the lock
		// <sha1(handle)>.lock, extracts into <sha1>.<uuid>.tmp and
		// renames it to <sha1>/; <sha1>.descriptor.txt records who
		// downloaded it.
		Name: "tfhub", Framework: "TensorFlow Hub (weights)",
		Key:        "the model handle (its URL)",
		Paths:      []string{"$TFHUB_CACHE_DIR", "{tmp}/tfhub_modules"},
		EntryDepth: 1,
		Temp:       []string{"*.tmp"},
		Ignore:     []string{"*.lock", "*.descriptor.txt"},
		Hit:        "<sha1(handle)>/ listed (not empty), saved_model.pb and variables/ read",
		Switches: []Switch{{Env: "TFHUB_MODEL_LOAD_FORMAT", Values: []string{"UNCOMPRESSED"},
			Effect: "the cache is bypassed: every load reads the model from its remote storage"}},
		Packages:                []string{"tensorflow_hub"},
		SeenWithoutPathSyscalls: true,
		Source:                  "tensorflow_hub/resolver.py (tfhub_cache_dir, atomic_download, _temp_download_dir, _lock_filename)",
	},
	{
		Name: "vllm", Framework: "vLLM", Compiles: true,
		Paths:      []string{"$VLLM_CACHE_ROOT", "$XDG_CACHE_HOME/vllm", "~/.cache/vllm"},
		EntryDepth: 2,
		Temp:       []string{".*.tmp", "*.tmp"},
		Ignore:     []string{"*.lock"},
		Hit:        "torch_compile_cache/<hash>/ entries read (writes go through Inductor/Triton)",
		Packages:   []string{"vllm"},
		Source:     "vllm/envs.py, vllm/compilation/backends.py",
	},
	{
		Name: "flashinfer", Framework: "FlashInfer", Compiles: true,
		Paths:                   []string{"$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer", "~/.cache/flashinfer"},
		Also:                    []string{"$FLASHINFER_CUBIN_DIR"},
		EntryDepth:              3,
		Ignore:                  []string{"*.lock", "build.ninja", ".ninja_log", ".ninja_deps"},
		Hit:                     "ninja runs and finds nothing to do; <name>.so opened for reading",
		Packages:                []string{"flashinfer"},
		SeenWithoutPathSyscalls: true,
		Source:                  "flashinfer/jit/env.py, jit/core.py, jit/cpp_ext.py",
	},
	{
		Name: "deepgemm", Framework: "DeepGEMM", Compiles: true,
		Paths:      []string{"$DG_JIT_CACHE_DIR", "$DG_CACHE_DIR", "~/.deep_gemm"},
		EntryDepth: 2,
		Temp:       []string{"tmp"},
		Hit:        "cache/kernel.<name>.<hex>/kernel.cubin opened for reading",
		Packages:   []string{"deep_gemm"},
		Source:     "csrc/jit/compiler.hpp",
	},
	{
		Name: "jax", Framework: "JAX", Compiles: true,
		Key:      "the computation, the jax and jaxlib versions, the device and the compile options",
		Paths:    []string{"$JAX_COMPILATION_CACHE_DIR"},
		Entries:  []string{"*-cache"},
		Ignore:   []string{"*-atime"},
		Hit:      "<key>-cache read; <key>-atime rewritten",
		Packages: []string{"jax", "jaxlib"},
		Source:   "jax/_src/config.py, jax/_src/lru_cache.py",
	},
	{
		Name: "cupy", Framework: "CuPy", Compiles: true,
		Key:      "the kernel source, the CuPy and CUDA versions and the GPU architecture",
		Paths:    []string{"$CUPY_CACHE_DIR", "~/.cupy/kernel_cache"},
		Temp:     []string{"tmp*"},
		Hit:      "<md5>_2.cubin opened for reading",
		Switches: []Switch{{Env: "CUPY_CACHE_IN_MEMORY", Values: []string{"1"}, Effect: "kernels are cached in memory only: each process compiles again"}},
		Uses:     []string{"libnvrtc*"},
		Source:   "cupy/cuda/compiler.py",
	},
	{
		Name: "numba", Framework: "Numba", Compiles: true,
		Key:     "the source file's path, modification time and size, the function's signature, the Numba version and the CPU",
		Paths:   []string{"$NUMBA_CACHE_DIR", "**/__pycache__"},
		Also:    []string{"$XDG_CACHE_HOME/numba", "~/.cache/numba"},
		Entries: []string{"*.nbi", "*.nbc"},
		Temp:    []string{"*.tmp.*"},
		Hit:     ".nbi index read, source stat'ed, .nbc read",
		// Mapped by the import of numba: an existing process attached to
		// has no import left to see, yet its library says Numba is there.
		Uses:     []string{"libllvmlite*"},
		Packages: []string{"numba"},
		Source:   "numba/core/caching.py",
	},
	{
		Name: "pocl", Framework: "PoCL (OpenCL on CPU)", Compiles: true,
		Key:        "the program source, the build options and the device",
		Paths:      []string{"$POCL_CACHE_DIR", "$XDG_CACHE_HOME/pocl/kcache", "~/.cache/pocl/kcache", "/tmp/pocl/kcache"},
		EntryDepth: 2,
		Temp:       []string{"tempfile*"},
		Ignore:     []string{"last_accessed"},
		Hit:        "program.bc and <kernel>.so read; last_accessed touched",
		Switches:   []Switch{{Env: "POCL_KERNEL_CACHE", Values: []string{"0"}, Effect: "the kernel cache is off: every kernel is compiled on each run"}},
		Uses:       []string{"libpocl.so*"},
		Source:     "pocl pocl_cache.c",
	},
	{
		// PyOpenCL keeps each built program's binary itself and hands
		// it to the OpenCL driver on a hit: PoCL then finds its own
		// kernel cache under a key of the binary, not of the source, so
		// both caches decide a rerun's hits.
		Name: "pyopencl", Framework: "PyOpenCL", Compiles: true,
		Paths:      []string{"$XDG_CACHE_HOME/pyopencl", "~/.cache/pyopencl"},
		EntryDepth: 2,
		Ignore:     []string{"lock"},
		Hit:        "pyopencl-compiler-cache-v2-py<version>/<key>/info and binary read",
		Switches:   []Switch{{Env: "PYOPENCL_NO_CACHE", Effect: "the program cache is off: every program is built from source on each run"}},
		Packages:   []string{"pyopencl"},
		Source:     "pyopencl/cache.py (create_built_program_from_source_cached, retrieve_from_cache), __init__.py (_PYOPENCL_NO_CACHE)",
	},
	{
		Name: "mesa", Framework: "Mesa shader cache", Compiles: true,
		Paths:    []string{"$MESA_SHADER_CACHE_DIR", "$XDG_CACHE_HOME/mesa_shader_cache", "~/.cache/mesa_shader_cache"},
		Temp:     []string{"*.tmp"},
		Ignore:   []string{"index", "marker"},
		Hit:      "<2hex>/<38hex> read; index opened O_RDWR|O_CREAT",
		Switches: []Switch{{Env: "MESA_SHADER_CACHE_DISABLE", Values: []string{"1", "true", "yes"}, Effect: "the shader cache is off: shaders are compiled on each run"}},
		Limit:    "",
		Uses:     []string{"*_dri.so", "libgallium*", "libvulkan_*.so"},
		Source:   "mesa src/util/disk_cache_os.c",
	},
	{
		Name: "torch_tensorrt", Framework: "Torch-TensorRT", Compiles: true,
		Paths:      []string{"{tmp}/torch_tensorrt_engine_cache"},
		EntryDepth: 1,
		Ignore:     []string{"timing_cache.bin"},
		Hit:        "<hash>/blob.bin read",
		Packages:   []string{"torch_tensorrt"},
		Source:     "py/torch_tensorrt/dynamo/_engine_cache.py",
	},
	{
		Name: "onnxruntime_trt", Framework: "ONNX Runtime TensorRT EP", Compiles: true,
		Paths:    []string{"$ORT_TENSORRT_CACHE_PATH", "$ORT_TENSORRT_ENGINE_CACHE_PATH"},
		Entries:  []string{"*.engine", "*.timing", "*.profile"},
		Hit:      "the .engine file read",
		Switches: []Switch{{Env: "ORT_TENSORRT_ENGINE_CACHE_ENABLE", Values: []string{"0"}, Effect: "the engine cache is off: engines are built on each run"}},
		Uses:     []string{"libonnxruntime_providers_tensorrt.so*"},
		Source:   "tensorrt_execution_provider.h",
	},
	{
		Name: "python", Framework: "Python bytecode", Compiles: true,
		Key:               "the source file's modification time and size (or its hash) and the Python version",
		Paths:             []string{"$PYTHONPYCACHEPREFIX", "**/__pycache__"},
		Entries:           []string{"*.pyc"},
		Temp:              []string{"*.pyc.*"},
		Hit:               "source stat'ed, .pyc read",
		Switches:          []Switch{{Env: "PYTHONDONTWRITEBYTECODE", Effect: "bytecode is never written: every import without a .pyc compiles again"}},
		Uses:              []string{"python*", "libpython*"},
		PageCacheEvidence: true,
		Source:            "CPython importlib/_bootstrap_external.py (_write_atomic)",
	},
	{
		Name: "comfyui", Framework: "ComfyUI models (weights)",
		Paths:                   []string{"**/ComfyUI/models"},
		Hit:                     "models/<type>/<file> opened for reading",
		Packages:                []string{"comfy"},
		SeenWithoutPathSyscalls: true,
		Source:                  "folder_paths.py (extra_model_paths.yaml moves it: use --cache-dir comfyui=PATH)",
	},
}

// ArgCompiler names a compiler process by its arguments, for compile
// workers that are interpreters (Inductor's pool is `python
// …/_inductor/compile_worker/__main__.py`).
type ArgCompiler struct {
	Name     string
	Contains string
}

// DefaultArgCompilers are the compile workers recognised by argument.
var DefaultArgCompilers = []ArgCompiler{
	{Name: "inductor_compile_worker", Contains: "_inductor/compile_worker"},
}

// Lookup returns the registry entry named name.
func Lookup(name string) (Spec, bool) {
	for _, s := range Registry {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// allTemp is every registry temp pattern, for --cache-dir caches.
func allTemp() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range Registry {
		for _, t := range s.Temp {
			if t != "tmp" && t != "tmp*" && !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// UserSpec is the spec of a --cache-dir NAME=PATH cache: the registry's
// layout when NAME is a known cache, else one entry per file with every
// known temp-name pattern.
func UserSpec(name, path string) Spec {
	s, ok := Lookup(name)
	if !ok {
		s = Spec{Name: name, Framework: "--cache-dir", Compiles: true, Temp: allTemp(),
			Ignore: []string{"*.lock", "lock"}, Hit: "an existing file opened for reading"}
	}
	s.Paths = []string{path}
	s.Also = nil
	return s
}
