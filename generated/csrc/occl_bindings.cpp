// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m codegen`.
//
// The Python module torch_occl._C: the backend class (a subclass of torch's
// c10d Backend, held by c10::intrusive_ptr as torch requires) and its Options.
#include <torch/csrc/utils/pybind.h>

#include "ProcessGroupOCCL.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, module) {
  // The base classes are torch's; importing their module registers them with pybind11.
  py::module_::import("torch._C._distributed_c10d");

  module.attr("BACKEND_NAME") = "occl";
  module.attr("DEVICES") = py::make_tuple("cpu");
  module.attr("OPS") = py::make_tuple("broadcast", "allreduce", "allgather", "_allgather_base", "reduce_scatter", "_reduce_scatter_base", "barrier");

  using Backend = occl::ProcessGroupOCCL;
  auto backend = py::class_<Backend, c10d::Backend, c10::intrusive_ptr<Backend>>(
      module, "ProcessGroupOCCL");

  py::class_<Backend::Options, c10d::Backend::Options, c10::intrusive_ptr<Backend::Options>>(
      backend, "Options")
      .def(py::init([] { return c10::make_intrusive<Backend::Options>(); }))
      .def_readwrite("bind_address", &Backend::Options::bind_address,
                     "Address this rank's listening socket binds to; peers connect to it.")
      .def_readwrite("group_id", &Backend::Options::group_id,
                     "torch.distributed's id of the group ('0' is the default group); names store keys.")
      ;

  backend.def(
      py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                  const c10::intrusive_ptr<Backend::Options>& options) {
        return c10::make_intrusive<Backend>(store, rank, size, options);
      }),
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("options"),
      py::call_guard<py::gil_scoped_release>());
}
