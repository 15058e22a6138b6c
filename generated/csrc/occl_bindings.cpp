// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m occl_codegen --spec spec/collectives.yaml --out generated` in the folder holding spec/ and generated/.
//
// The Python module torch_occl._C: the backend class (a subclass of torch's
// c10d Backend, held by c10::intrusive_ptr as torch requires) and its Options.
#include <torch/csrc/utils/pybind.h>

#include "ProcessGroupOCCL.hpp"
#include "occl_kit/flight_recorder.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, module) {
  // The base classes are torch's; importing their module registers them with pybind11.
  py::module_::import("torch._C._distributed_c10d");

  module.attr("BACKEND_NAME") = "occl";
  module.attr("DEVICES") = py::make_tuple("cpu", "occldev");
  module.attr("OPS") = py::make_tuple("broadcast", "allreduce", "allgather", "_allgather_base", "reduce_scatter", "_reduce_scatter_base", "barrier", "allreduce_coalesced", "allreduce_sparse", "reduce", "allgather_coalesced", "allgather_into_tensor_coalesced", "gather", "scatter", "reduce_scatter_tensor_coalesced", "alltoall_base", "alltoall", "send", "recv", "recvAnysource");

  using Backend = occl::ProcessGroupOCCL;
  auto backend = py::class_<Backend, c10d::Backend, c10::intrusive_ptr<Backend>>(
      module, "ProcessGroupOCCL");

  py::class_<Backend::Options, c10d::Backend::Options, c10::intrusive_ptr<Backend::Options>>(
      backend, "Options")
      .def(py::init([] { return c10::make_intrusive<Backend::Options>(); }))
      // torch's split_group deep-copies the parent's options.
      .def("__deepcopy__", [](const Backend::Options& self, const py::dict&) {
        return c10::make_intrusive<Backend::Options>(self);
      })
      .def_readwrite("bind_address", &Backend::Options::bind_address,
                     "Address this rank's listening socket binds to; peers connect to it.")
      ;

  backend.def(
      py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                  const c10::intrusive_ptr<Backend::Options>& options) {
        return c10::make_intrusive<Backend>(store, rank, size, options);
      }),
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("options"),
      py::call_guard<py::gil_scoped_release>());
  // What the group was made with (torch's split_group starts the subgroup's options from it).
  backend.def_property_readonly("options", &Backend::getBackendOptions);

  // Every group's last collectives, in torch's flight recorder format (occl_kit/flight_recorder.hpp),
  // written where TORCH_FR_DUMP_TEMP_FILE says for this process's rank; returns the path.
  module.def("dump_flight_recorder", [] { return ::occl::kit::FlightRecorder::get().write_dump(); },
             py::call_guard<py::gil_scoped_release>());

  // torch's Backend binding lacks some ops (the *_coalesced ones); bind those, so every op of the
  // spec can be called from Python.
  if (!py::hasattr(backend, "broadcast")) {
    backend.def("broadcast", &Backend::broadcast,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "allreduce")) {
    backend.def("allreduce", &Backend::allreduce,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "allgather")) {
    backend.def("allgather", &Backend::allgather,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "_allgather_base")) {
    backend.def("_allgather_base", &Backend::_allgather_base,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "reduce_scatter")) {
    backend.def("reduce_scatter", &Backend::reduce_scatter,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "_reduce_scatter_base")) {
    backend.def("_reduce_scatter_base", &Backend::_reduce_scatter_base,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "barrier")) {
    backend.def("barrier", &Backend::barrier,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "allreduce_coalesced")) {
    backend.def("allreduce_coalesced", &Backend::allreduce_coalesced,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "allreduce_sparse")) {
    backend.def("allreduce_sparse", &Backend::allreduce_sparse,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "reduce")) {
    backend.def("reduce", &Backend::reduce,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "allgather_coalesced")) {
    backend.def("allgather_coalesced", &Backend::allgather_coalesced,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "allgather_into_tensor_coalesced")) {
    backend.def("allgather_into_tensor_coalesced", &Backend::allgather_into_tensor_coalesced,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "gather")) {
    backend.def("gather", &Backend::gather,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "scatter")) {
    backend.def("scatter", &Backend::scatter,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "reduce_scatter_tensor_coalesced")) {
    backend.def("reduce_scatter_tensor_coalesced", &Backend::reduce_scatter_tensor_coalesced,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "alltoall_base")) {
    backend.def("alltoall_base", &Backend::alltoall_base,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "alltoall")) {
    backend.def("alltoall", &Backend::alltoall,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "send")) {
    backend.def("send", &Backend::send,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "recv")) {
    backend.def("recv", &Backend::recv,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "recv_anysource")) {
    backend.def("recv_anysource", &Backend::recvAnysource,
                py::call_guard<py::gil_scoped_release>());
  }

  // torch's new_group calls this on the ranks left out of a new group when the default group's
  // backend supports splitting (NCCL's comm split is collective over the parent). The members
  // form their group through the factory and the store, without this group: the ranks left out
  // have no part to take.
  backend.def("perform_nocolor_split", [](Backend&, const c10::Device&) {}, py::arg("device"));

  // What else the runtime offers Python (spec: backend.runtime.python_extensions).
  ::occl::runtime::bind_extensions(module);
}
