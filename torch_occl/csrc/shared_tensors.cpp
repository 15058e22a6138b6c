// Tensors in memory the ranks of a group map together (transport/shared_segments.hpp), for
// torch_occl.shared_empty, which runs the exchange between the ranks in Python.
#include "occl_contract.hpp"

#include "transport/memfd.hpp"
#include "transport/peer_memory.hpp"
#include "transport/shared_segments.hpp"

#include <ATen/ops/from_blob.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>

namespace occl::runtime {

namespace py = pybind11;
using transport::SharedAllocation;

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
}

}  // namespace occl::runtime
