// cuda-gate's launch recorder: a CUPTI injection library (CUDA_INJECTION64_PATH).
//
// The driver loads it at cuInit and calls InitializeInjection(). It subscribes to
// CUPTI's callback API and records, per process, every module the driver loads and
// every kernel launch: function name, how many launches, the first launch's time, and
// what the driver says about the function's code (CU_FUNC_ATTRIBUTE_BINARY_VERSION:
// the SASS it runs; CU_FUNC_ATTRIBUTE_PTX_VERSION: the virtual architecture it came
// from). It changes nothing it observes: no JIT option, no cache, no loading mode, no
// extra CUDA call but two attribute queries after a function's first launch.
//
// A runtime launch (cudaLaunchKernel) shows CUPTI no driver launch underneath, so the
// driver is never asked about its function. Its code is named from the module instead:
// at the module-loaded callback the recorder reads the cubin the driver loaded for this
// device (the SASS it picked from a fatbin, or the JIT's output) and keeps its SM arch
// (ELF e_flags), its kernels (.symtab entry functions) and its SHA-256, so the gate can
// tell embedded SASS from JIT output by content.
//
// Cost: a launch is one lock and one hash lookup. I/O happens only when a module is
// loaded outside the CUDA runtime (its image is written once, by content), at a
// module unload and at exit, when the record is written whole:
//
//   $CUDA_GATE_LAUNCH_DIR/launches.<pid>.json   (format "cuda-gate-launches", version 2)
//   $CUDA_GATE_LAUNCH_DIR/module-<pid>-<id>.bin (the image CUPTI handed over)
//
// A module loaded inside a CUDA runtime call is the runtime's own loading of a
// registered fatbin (the program's or a library's, inspected as files); its image is
// not written unless the call was cudaLibraryLoadData/cudaLibraryLoadFromFile. Every
// other module came from somewhere no file inspection sees: cuModuleLoad* or
// cuLibraryLoad* called directly (a .cubin/.ptx file, NVRTC's output, Triton).
// gate/launch/log.py reads the record; gate/schemas/launches.schema.json is its shape.

#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Kernel {
  std::string name;
  // The launching API, copied: CUPTI's name of a runtime call can live in a static CUDA
  // runtime inside a library the program dlclose()s before exit, when the record is written.
  std::string api;
  uint64_t count = 0;
  uint64_t first_ns = 0;
  int binary_version = -1;  // -1: the driver was not asked (a runtime launch it hid)
  int ptx_version = -1;
  bool driver_seen = false;
};

struct Load {
  std::string api;   // cuModuleLoad, cuModuleLoadData, cuLibraryLoadFromFile, ...
  std::string file;  // the file it named
  uint64_t size = 0;
  uint64_t fnv64 = 0;
  std::string image;  // the image handed over, as written ("" for a file load)
  std::string note;
  int result = -1;  // the CUresult it returned
  std::string error;
  bool pending = true;
};

struct Module {
  uint32_t id;
  uint64_t size;
  uint64_t fnv64;
  std::string during;  // the API call the load happened inside ("" outside any)
  std::string origin;  // runtime | driver
  std::string file;    // the file named to cuModuleLoad / cu(da)LibraryLoadFromFile
  std::string image;   // the written image's file name, "" when not written
  std::string note;
  int arch = -1;  // the cubin's SM (90: sm_90); -1 when the image is no readable cubin
  std::vector<std::string> kernels;  // its entry functions, in symbol table order
  std::string sha256;                // of the cubin, hex; "" when there is none
};

typedef CUresult (*FuncGetAttribute)(int *, CUfunction_attribute, CUfunction);
typedef CUresult (*GetErrorName)(CUresult, const char **);

// Never destroyed: a library the program loaded before us (libkernels.so with its static
// runtime) unregisters its modules in its own destructors, after ours would have run, and
// CUPTI calls us then. So the state lives on the heap, reached through references, and
// outlives every destructor (the process is ending; the memory goes with it).
// Recursive: a driver call made under it may load a module, whose callback locks too.
std::recursive_mutex &lock = *new std::recursive_mutex;
std::vector<Kernel *> &kernels = *new std::vector<Kernel *>;
std::unordered_map<std::string, Kernel *> &by_name = *new std::unordered_map<std::string, Kernel *>;
// symbolName pointers seen
std::unordered_map<const void *, Kernel *> &by_pointer =
    *new std::unordered_map<const void *, Kernel *>;
std::vector<Module> &modules = *new std::vector<Module>;
std::vector<Load> &loads = *new std::vector<Load>;
// "<fnv64>:<size>" -> image file
std::unordered_map<std::string, std::string> &written =
    *new std::unordered_map<std::string, std::string>;
std::vector<std::string> &errors = *new std::vector<std::string>;
std::string &folder = *new std::string;
std::string &program = *new std::string;
uint64_t budget = 256ull << 20;  // image bytes this process may write
uint64_t spent = 0;
uint64_t started_ns = 0;
FuncGetAttribute get_attribute = nullptr;
GetErrorName error_name = nullptr;
CUpti_SubscriberHandle subscriber = nullptr;
bool active = false;

// Per thread: how deep inside CUDA runtime calls, and the load call under way.
thread_local int runtime_depth = 0;
thread_local bool runtime_load = false;
// The API call a module load happens inside, copied for the same reason (a plain buffer,
// like load_file below; "" outside any call).
thread_local char driver_call[128];

void set_driver_call(const char *name) {
  driver_call[0] = 0;
  if (name) snprintf(driver_call, sizeof driver_call, "%s", name);
}
// A plain buffer: a thread_local std::string is destroyed at thread exit, and the main
// thread's callbacks still run after that (see the state above).
thread_local char load_file[4096];

void set_load_file(const char *name) {
  load_file[0] = 0;
  if (name) snprintf(load_file, sizeof load_file, "%s", name);
}
thread_local Kernel *runtime_kernel = nullptr;
thread_local Kernel *driver_kernel = nullptr;

uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t fnv1a(const char *data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= uint8_t(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// SHA-256 (FIPS 180-4), to compare a loaded cubin with the ones the gate inspected.
std::string sha256_hex(const unsigned char *data, size_t size) {
  static const uint32_t K[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  auto block = [&](const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 |
             uint32_t(p[4 * i + 2]) << 8 | uint32_t(p[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  };
  size_t whole = size / 64 * 64;
  for (size_t i = 0; i < whole; i += 64) block(data + i);
  unsigned char tail[128] = {0};
  size_t rest = size - whole;
  memcpy(tail, data + whole, rest);
  tail[rest] = 0x80;
  size_t end = rest + 9 <= 64 ? 64 : 128;
  uint64_t bits = uint64_t(size) * 8;
  for (int i = 0; i < 8; ++i) tail[end - 1 - i] = uint8_t(bits >> (8 * i));
  block(tail);
  if (end == 128) block(tail + 64);
  char out[65];
  for (int i = 0; i < 8; ++i) snprintf(out + 8 * i, 9, "%08x", h[i]);
  return std::string(out, 64);
}

// What a loaded cubin says of itself, read as gate/reader/cubin.py reads it: the SM from
// e_flags (ABI version 7: e_flags & 0xff; 8 and later: (e_flags >> 8) & 0xff) and the
// kernels, the .symtab's defined STT_FUNC symbols with STO_CUDA_ENTRY (0x10). Every
// offset is checked against the cubin's size: a bad image gives arch -1, no kernels.
struct CubinFacts {
  int arch = -1;
  std::vector<std::string> kernels;
};

template <typename T>
bool read_at(const unsigned char *data, uint64_t size, uint64_t offset, T *out) {
  if (offset > size || size - offset < sizeof(T)) return false;
  memcpy(out, data + offset, sizeof(T));
  return true;
}

CubinFacts read_cubin(const unsigned char *data, uint64_t size) {
  CubinFacts facts;
  const uint16_t EM_CUDA = 190;
  const uint32_t SHT_SYMTAB = 2;
  if (data == nullptr || size < 64 || memcmp(data, "\x7f" "ELF", 4) != 0) return facts;
  if (data[4] != 2 || data[5] != 1) return facts;  // ELF64, little endian: every cubin
  // Zero where a read falls outside the image (read_at then leaves them as they are).
  uint16_t machine = 0, shentsize = 0, shnum = 0;
  uint32_t flags = 0;
  uint64_t shoff = 0;
  read_at(data, size, 0x12, &machine);
  read_at(data, size, 0x28, &shoff);
  read_at(data, size, 0x30, &flags);
  read_at(data, size, 0x3a, &shentsize);
  read_at(data, size, 0x3c, &shnum);
  if (machine != EM_CUDA) return facts;
  facts.arch = data[8] >= 8 ? int((flags >> 8) & 0xff) : int(flags & 0xff);
  uint64_t count = shnum;
  if (count == 0 && shoff != 0 && !read_at(data, size, shoff + 0x20, &count)) return facts;
  // More than SHN_LORESERVE sections: the count is section 0's sh_size, as elffile.py reads it.
  if (shentsize != 64 || shoff == 0 || shoff > size || (size - shoff) / 64 < count) return facts;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t header = shoff + uint64_t(i) * 64;
    uint32_t type = 0, link = 0;
    uint64_t offset = 0, bytes = 0, entsize = 0;
    read_at(data, size, header + 4, &type);
    if (type != SHT_SYMTAB) continue;
    read_at(data, size, header + 0x18, &offset);
    read_at(data, size, header + 0x20, &bytes);
    read_at(data, size, header + 0x28, &link);
    read_at(data, size, header + 0x38, &entsize);
    if (entsize != 24 || link == 0 || link >= count || offset > size || size - offset < bytes)
      continue;
    uint64_t strings_header = shoff + uint64_t(link) * 64, strings = 0, strings_size = 0;
    read_at(data, size, strings_header + 0x18, &strings);
    read_at(data, size, strings_header + 0x20, &strings_size);
    if (strings > size || size - strings < strings_size) continue;
    for (uint64_t at = offset; at + 24 <= offset + bytes; at += 24) {
      uint32_t name = 0;
      uint8_t info = 0, other = 0;
      uint16_t shndx = 0;
      read_at(data, size, at, &name);
      read_at(data, size, at + 4, &info);
      read_at(data, size, at + 5, &other);
      read_at(data, size, at + 6, &shndx);
      if ((info & 0xf) != 2 || shndx == 0 || !(other & 0x10)) continue;
      if (name >= strings_size) {
        facts.kernels.emplace_back();
        continue;
      }
      const char *text = reinterpret_cast<const char *>(data + strings + name);
      facts.kernels.emplace_back(text, strnlen(text, size_t(strings_size - name)));
    }
  }
  return facts;
}

void json_string(std::string &out, const std::string &text) {
  out += '"';
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

bool write_file(const std::string &path, const char *data, size_t size) {
  std::string temp = path + ".part";
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) {
      close(fd);
      unlink(temp.c_str());
      return false;
    }
    done += size_t(n);
  }
  close(fd);
  return rename(temp.c_str(), path.c_str()) == 0;
}

// The whole record, written atomically; called with the lock held.
void write_record(bool complete) {
  if (folder.empty()) return;
  std::string out = "{\"format\": \"cuda-gate-launches\", \"version\": 2, \"pid\": ";
  out += std::to_string(getpid());
  out += ", \"program\": ";
  json_string(out, program);
  out += ", \"started_ns\": " + std::to_string(started_ns);
  out += ", \"complete\": ";
  out += complete ? "true" : "false";
  out += ",\n \"modules\": [";
  for (size_t i = 0; i < modules.size(); ++i) {
    const Module &m = modules[i];
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)m.fnv64);
    out += i ? ",\n  {" : "\n  {";
    out += "\"id\": " + std::to_string(m.id) + ", \"size\": " + std::to_string(m.size);
    out += ", \"fnv64\": \"";
    out += hash;
    out += "\", \"origin\": ";
    json_string(out, m.origin);
    out += ", \"during\": ";
    json_string(out, m.during);
    out += ", \"file\": ";
    json_string(out, m.file);
    out += ", \"image\": ";
    json_string(out, m.image);
    out += ", \"note\": ";
    json_string(out, m.note);
    out += ", \"arch\": " + std::to_string(m.arch) + ", \"sha256\": ";
    json_string(out, m.sha256);
    out += ", \"kernels\": [";
    for (size_t j = 0; j < m.kernels.size(); ++j) {
      if (j) out += ", ";
      json_string(out, m.kernels[j]);
    }
    out += "]}";
  }
  out += "],\n \"loads\": [";
  for (size_t i = 0; i < loads.size(); ++i) {
    const Load &l = loads[i];
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)l.fnv64);
    out += i ? ",\n  {" : "\n  {";
    out += "\"api\": ";
    json_string(out, l.api);
    out += ", \"file\": ";
    json_string(out, l.file);
    out += ", \"size\": " + std::to_string(l.size) + ", \"fnv64\": \"";
    out += hash;
    out += "\", \"image\": ";
    json_string(out, l.image);
    out += ", \"note\": ";
    json_string(out, l.note);
    out += ", \"result\": " + std::to_string(l.pending ? -1 : l.result) + ", \"error\": ";
    json_string(out, l.error);
    out += "}";
  }
  out += "],\n \"kernels\": [";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Kernel &k = *kernels[i];
    out += i ? ",\n  {" : "\n  {";
    out += "\"name\": ";
    json_string(out, k.name);
    out += ", \"api\": ";
    json_string(out, k.api);
    out += ", \"count\": " + std::to_string(k.count);
    out += ", \"first_ns\": " + std::to_string(k.first_ns);
    out += ", \"binary_version\": " + std::to_string(k.binary_version);
    out += ", \"ptx_version\": " + std::to_string(k.ptx_version) + "}";
  }
  out += "],\n \"errors\": [";
  for (size_t i = 0; i < errors.size(); ++i) {
    if (i) out += ", ";
    json_string(out, errors[i]);
  }
  out += "]}\n";
  std::string path = folder + "/launches." + std::to_string(getpid()) + ".json";
  write_file(path, out.data(), out.size());
}

Kernel *kernel_for(const char *name, const char *api) {
  if (name == nullptr) name = "(unnamed)";
  auto hit = by_pointer.find(name);
  if (hit != by_pointer.end() && hit->second->name == name) return hit->second;
  std::string key(name);
  auto found = by_name.find(key);
  Kernel *k;
  if (found != by_name.end()) {
    k = found->second;
  } else {
    k = new Kernel();
    k->name = key;
    k->api = api ? api : "";
    k->first_ns = now_ns();
    kernels.push_back(k);
    by_name.emplace(key, k);
  }
  by_pointer[name] = k;
  return k;
}

void describe_function(Kernel *k, CUfunction f) {
  if (k->driver_seen || f == nullptr || get_attribute == nullptr) return;
  k->driver_seen = true;
  int value = 0;
  if (get_attribute(&value, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f) == CUDA_SUCCESS)
    k->binary_version = value;
  if (get_attribute(&value, CU_FUNC_ATTRIBUTE_PTX_VERSION, f) == CUDA_SUCCESS)
    k->ptx_version = value;
}

bool runtime_launch(CUpti_CallbackId id) {
  switch (id) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      return true;
    default:
      return false;
  }
}

// The CUfunction of a driver launch, by the parameter layout of each launch call.
CUfunction launched_function(CUpti_CallbackId id, const void *params) {
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return static_cast<const cuLaunchKernel_params *>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return static_cast<const cuLaunchKernelEx_params *>(params)->f;
    default:
      return nullptr;
  }
}

const CUpti_CallbackId DRIVER_LAUNCHES[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};
const CUpti_CallbackId DRIVER_LOADS[] = {
    CUPTI_DRIVER_TRACE_CBID_cuModuleLoad,          CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
    CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx,    CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary,
    CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData,     CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile,
};

// The parameter block of cudaLibraryLoadFromFile (generated_cuda_runtime_api_meta.h).
struct RuntimeLibraryFromFile {
  void *library;
  const char *fileName;
};

void on_runtime(CUpti_CallbackId id, const CUpti_CallbackData *cb) {
  bool load = id == CUPTI_RUNTIME_TRACE_CBID_cudaLibraryLoadData_v12060 ||
              id == CUPTI_RUNTIME_TRACE_CBID_cudaLibraryLoadFromFile_v12060;
  if (cb->callbackSite == CUPTI_API_EXIT) {
    if (runtime_depth > 0) --runtime_depth;
    if (load) runtime_load = false;
    if (runtime_launch(id)) runtime_kernel = nullptr;
    return;
  }
  ++runtime_depth;
  if (load) {
    runtime_load = true;
    set_driver_call(cb->functionName);
    set_load_file(nullptr);
    if (id == CUPTI_RUNTIME_TRACE_CBID_cudaLibraryLoadFromFile_v12060) {
      auto p = static_cast<const RuntimeLibraryFromFile *>(cb->functionParams);
      set_load_file(p->fileName);
    }
  }
  if (runtime_launch(id)) {
    std::lock_guard<std::recursive_mutex> hold(lock);
    Kernel *k = kernel_for(cb->symbolName, cb->functionName);
    ++k->count;
    runtime_kernel = k;
  }
}

// The fatbin a registration wrapper points at: what nvcc's __fatBinC_Wrapper_t (magic
// 0x466243B1, a version, then the fatbin's address) hands to cuLibraryLoadData and
// cuModuleLoadFatBinary; any other image is itself.
const char *unwrapped(const char *image) {
  if (image == nullptr) return nullptr;
  uint32_t magic;
  memcpy(&magic, image, 4);
  if (magic != 0x466243B1u) return image;
  const char *data;
  memcpy(&data, image + 8, sizeof data);
  return data;
}

// How many bytes an image handed to cuModuleLoadData & co. holds: a fatbin says so in
// its header, an ELF cubin ends with its section headers, PTX is a C string.
size_t image_size(const char *image) {
  if (image == nullptr) return 0;
  uint32_t magic;
  memcpy(&magic, image, 4);
  if (magic == 0xBA55ED50u) {  // fatbin container: 16-byte header, 64-bit payload size
    uint16_t header;
    uint64_t payload;
    memcpy(&header, image + 6, 2);
    memcpy(&payload, image + 8, 8);
    return size_t(header) + size_t(payload);
  }
  if (magic == 0x464c457fu && image[4] == 2) {  // ELF64 cubin
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, image + 0x28, 8);
    memcpy(&shentsize, image + 0x3a, 2);
    memcpy(&shnum, image + 0x3c, 2);
    return size_t(shoff) + size_t(shentsize) * size_t(shnum);
  }
  return strlen(image) + 1;  // PTX text
}

std::string keep_image(const char *data, size_t size, uint64_t *hash, std::string *note) {
  *hash = fnv1a(data, size);
  char key[48];
  snprintf(key, sizeof key, "%016llx:%llu", (unsigned long long)*hash, (unsigned long long)size);
  auto seen = written.find(key);
  if (seen != written.end()) return seen->second;
  if (spent + size > budget) {
    *note = "image not kept: over CUDA_GATE_LAUNCH_BYTES";
    return "";
  }
  std::string name = "image-" + std::to_string(getpid()) + "-" + std::to_string(written.size()) + ".bin";
  if (!write_file(folder + "/" + name, data, size)) {
    *note = "image could not be written";
    return "";
  }
  spent += size;
  written.emplace(key, name);
  return name;
}

const void *load_image(CUpti_CallbackId id, const void *params) {
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData:
      return static_cast<const cuModuleLoadData_params *>(params)->image;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx:
      return static_cast<const cuModuleLoadDataEx_params *>(params)->image;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary:
      return static_cast<const cuModuleLoadFatBinary_params *>(params)->fatCubin;
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData:
      return static_cast<const cuLibraryLoadData_params *>(params)->code;
    default:
      return nullptr;
  }
}

void on_driver(CUpti_CallbackId id, const CUpti_CallbackData *cb) {
  CUfunction f = launched_function(id, cb->functionParams);
  if (f != nullptr) {
    std::lock_guard<std::recursive_mutex> hold(lock);
    bool inside_runtime = runtime_depth > 0 && runtime_kernel != nullptr;
    if (cb->callbackSite == CUPTI_API_EXIT) {
      // Asked after the launch, when the driver has loaded the function's code.
      Kernel *k = inside_runtime ? runtime_kernel : driver_kernel;
      if (k != nullptr) describe_function(k, f);
      if (!inside_runtime) driver_kernel = nullptr;
      if (runtime_depth == 0) set_driver_call(nullptr);
      return;
    }
    if (inside_runtime) return;  // counted once, as the runtime call
    if (runtime_depth == 0) {
      set_driver_call(cb->functionName);  // a module loaded lazily now is the driver's
      set_load_file(nullptr);
    }
    Kernel *k = kernel_for(cb->symbolName, cb->functionName);
    ++k->count;
    driver_kernel = k;
    return;
  }
  if (runtime_depth > 0) return;  // the runtime's own loading
  std::lock_guard<std::recursive_mutex> hold(lock);
  if (cb->callbackSite == CUPTI_API_EXIT) {
    // The load call's result: a module the driver refused never reaches on_module.
    if (!loads.empty() && loads.back().pending) {
      Load &l = loads.back();
      l.pending = false;
      l.result = *static_cast<const CUresult *>(cb->functionReturnValue);
      const char *name = nullptr;
      if (error_name != nullptr && error_name(CUresult(l.result), &name) == CUDA_SUCCESS && name)
        l.error = name;
    }
    set_driver_call(nullptr);
    return;
  }
  set_driver_call(cb->functionName);
  set_load_file(nullptr);
  if (id == CUPTI_DRIVER_TRACE_CBID_cuModuleLoad) {
    auto p = static_cast<const cuModuleLoad_params *>(cb->functionParams);
    set_load_file(p->fname);
  } else if (id == CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile) {
    auto p = static_cast<const cuLibraryLoadFromFile_params *>(cb->functionParams);
    set_load_file(p->fileName);
  }
  Load l;
  l.api = cb->functionName;
  l.file = load_file;
  const char *image = static_cast<const char *>(load_image(id, cb->functionParams));
  image = unwrapped(image);
  if (image != nullptr) {
    l.size = image_size(image);
    l.image = keep_image(image, l.size, &l.fnv64, &l.note);
  }
  loads.push_back(l);
}

void on_module(CUpti_CallbackId id, const CUpti_ResourceData *rd) {
  auto md = static_cast<const CUpti_ModuleResourceData *>(rd->resourceDescriptor);
  std::lock_guard<std::recursive_mutex> hold(lock);
  if (id == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
    write_record(false);  // what ran so far survives a process that dies later
    return;
  }
  if (md == nullptr) return;
  Module m;
  m.id = md->moduleId;
  m.size = md->cubinSize;
  m.fnv64 = md->pCubin ? fnv1a(md->pCubin, md->cubinSize) : 0;
  bool by_runtime = runtime_depth > 0 && !runtime_load;
  m.origin = by_runtime ? "runtime" : "driver";
  m.during = driver_call;
  if (!by_runtime) m.file = load_file;
  if (md->pCubin != nullptr && md->cubinSize > 0) {
    auto data = reinterpret_cast<const unsigned char *>(md->pCubin);
    CubinFacts facts = read_cubin(data, md->cubinSize);
    m.arch = facts.arch;
    m.kernels = std::move(facts.kernels);
    m.sha256 = sha256_hex(data, md->cubinSize);
  }
  if (!by_runtime && md->pCubin != nullptr && md->cubinSize > 0)
    m.image = keep_image(md->pCubin, md->cubinSize, &m.fnv64, &m.note);
  modules.push_back(m);
}

void CUPTIAPI callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data) {
  if (!active) return;
  switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API:
      on_runtime(id, static_cast<const CUpti_CallbackData *>(data));
      break;
    case CUPTI_CB_DOMAIN_DRIVER_API:
      on_driver(id, static_cast<const CUpti_CallbackData *>(data));
      break;
    case CUPTI_CB_DOMAIN_RESOURCE:
      on_module(id, static_cast<const CUpti_ResourceData *>(data));
      break;
    default:
      break;
  }
}

void at_exit() {
  std::lock_guard<std::recursive_mutex> hold(lock);
  write_record(true);
  active = false;
}

std::string cupti_error(const char *what, CUptiResult status) {
  const char *text = nullptr;
  cuptiGetResultString(status, &text);
  return std::string(what) + ": " + (text ? text : "unknown CUPTI error");
}

}  // namespace

// For tests: what the recorder reads from a cubin, as the record's module fields say it
// (arch, SHA-256, kernels one a line), written to out (size bytes); the length it needs.
extern "C" __attribute__((visibility("default"))) size_t cuda_gate_describe_cubin(
    const void *cubin, size_t cubin_size, char *out, size_t size) {
  auto data = static_cast<const unsigned char *>(cubin);
  CubinFacts facts = read_cubin(data, cubin_size);
  std::string text = std::to_string(facts.arch) + "\n" + sha256_hex(data, cubin_size) + "\n";
  for (const std::string &k : facts.kernels) text += k + "\n";
  if (out != nullptr && size > 0) {
    size_t n = text.size() < size - 1 ? text.size() : size - 1;
    memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return text.size() + 1;
}

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char *dir = getenv("CUDA_GATE_LAUNCH_DIR");
  if (dir == nullptr || *dir == '\0') return 1;  // nowhere to write: observe nothing
  folder = dir;
  started_ns = now_ns();
  if (const char *cap = getenv("CUDA_GATE_LAUNCH_BYTES")) budget = strtoull(cap, nullptr, 10);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) program.assign(exe, size_t(n));
  error_name = reinterpret_cast<GetErrorName>(dlsym(RTLD_DEFAULT, "cuGetErrorName"));
  get_attribute = reinterpret_cast<FuncGetAttribute>(dlsym(RTLD_DEFAULT, "cuFuncGetAttribute"));
  atexit(at_exit);
  CUptiResult status = cuptiSubscribe(&subscriber, callback, nullptr);
  if (status != CUPTI_SUCCESS) {
    std::lock_guard<std::recursive_mutex> hold(lock);
    errors.push_back(cupti_error("cuptiSubscribe", status));
    write_record(false);
    return 1;
  }
  status = cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  if (status == CUPTI_SUCCESS)
    status = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                 CUPTI_CBID_RESOURCE_MODULE_LOADED);
  if (status == CUPTI_SUCCESS)
    status = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                 CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
  for (CUpti_CallbackId id : DRIVER_LAUNCHES)
    if (status == CUPTI_SUCCESS)
      status = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : DRIVER_LOADS)
    if (status == CUPTI_SUCCESS)
      status = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  std::lock_guard<std::recursive_mutex> hold(lock);
  if (status != CUPTI_SUCCESS) {
    errors.push_back(cupti_error("cuptiEnableCallback", status));
    write_record(false);
    return 1;
  }
  active = true;
  write_record(false);  // a process that dies before exit still says it was observed
  return 1;
}
