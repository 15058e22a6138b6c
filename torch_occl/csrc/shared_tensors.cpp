// Tensors in shared memory (transport/shared_segments.hpp): the helpers of
// torch_occl.shared_empty, which runs the exchange between the ranks in Python, and the pooled
// buffers of the backend's allocateTensor.
#include "runtime.hpp"

#include "transport/memfd.hpp"
#include "transport/mesh.hpp"
#include "transport/peer_memory.hpp"
#include "transport/segment_pool.hpp"
#include "transport/shared_segments.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>

namespace occl::runtime {

namespace py = pybind11;
using transport::SharedAllocation;

at::Tensor MeshRuntime::allocate_tensor(int64_t numel, const at::TensorOptions& options) {
  bool copies_between_ranks = false;
  {
    std::lock_guard<std::mutex> lock(mesh_mutex_);  // any thread may ask, even after close()
    copies_between_ranks = mesh_ && mesh_->peer_memory();
  }
  if (!options.device().is_cpu() || !copies_between_ranks) return at::empty({numel}, options);
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(
      c10::typeMetaToScalarType(options.dtype()));
  std::shared_ptr<void> buffer = transport::take_pooled_buffer(bytes);
  // The tensor's storage holds the buffer: freeing it gives the segment back to the pool.
  return at::from_blob(buffer.get(), {numel}, [buffer](void*) {}, options);
}

void bind_extensions(py::module_& module) {
  py::class_<SharedAllocation, std::shared_ptr<SharedAllocation>>(module, "_SharedAllocation")
      .def(py::init<size_t>(), py::arg("bytes"))
      .def_property_readonly("serial", &SharedAllocation::serial)
      .def_property_readonly("fd", &SharedAllocation::fd)
      .def("map_peer", &SharedAllocation::map_peer, py::arg("pid"), py::arg("token"),
           py::arg("serial"), py::arg("fd"))
      .def("close_fd", &SharedAllocation::close_fd)
      .def(
          "tensor",
          [](const std::shared_ptr<SharedAllocation>& self, const std::vector<int64_t>& sizes,
             at::ScalarType dtype) {
            auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
            const int64_t numel = c10::multiply_integers(sizes);
            TORCH_CHECK(static_cast<size_t>(numel) * c10::elementSize(dtype) <= self->bytes(),
                        "torch_occl.shared_empty: ", numel, " elements of ", dtype,
                        " do not fit the ", self->bytes(), " bytes allocated");
            // The tensor's storage holds the allocation: freeing it unmaps every segment.
            return at::from_blob(self->data(), sizes, [self](void*) {}, options);
          },
          py::arg("sizes"), py::arg("dtype"));
  module.def("_process_token", &transport::process_token);
  module.def("_host_identity", &transport::host_identity);
  // The probe a group runs before it copies straight between its ranks (peer_memory.hpp).
  module.def("_peer_memory_probe_address", &transport::PeerMemory::probe_address);
  module.def("_probe_peer_memory", &transport::PeerMemory::probe, py::arg("pid"),
             py::arg("address"));
  module.def("_bytes_through_shared_segments", &transport::bytes_through_segments);
  module.def("_pooled_segments", &transport::pooled_segments);
}

}  // namespace occl::runtime
