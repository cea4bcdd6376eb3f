// Python bindings: torch_ext_example._C
#include <torch/extension.h>

#include "ops.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace ops = torch_ext_example;
  m.doc() = "RMSNorm and SiLU-and-mul CUDA kernels (write into a given output tensor)";
  m.def("rms_norm", &ops::rms_norm, "out = x / sqrt(mean(x * x, -1) + eps) * weight",
        py::arg("out"), py::arg("x"), py::arg("weight"), py::arg("eps"));
  m.def("silu_and_mul", &ops::silu_and_mul, "out = silu(x[..., :d]) * x[..., d:]",
        py::arg("out"), py::arg("x"));
  m.def("silu_and_mul_uses_vectorized", &ops::silu_and_mul_uses_vectorized,
        "whether silu_and_mul(out, x) launches the vectorised kernel", py::arg("out"),
        py::arg("x"));
  m.attr("VECTORIZE_MIN_ELEMENTS") = ops::kVectorizeMinElements;
}
