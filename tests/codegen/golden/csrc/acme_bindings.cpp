// generated — do not edit. Source: fixtures/mini.yaml; regenerate with `python -m occl_codegen --spec fixtures/mini.yaml --out golden --python-out golden/python` in the folder holding fixtures/ and golden/.
//
// The Python module acme_dist._C: the backend class (a subclass of torch's
// c10d Backend, held by c10::intrusive_ptr as torch requires) and its Options.
#include <torch/csrc/utils/pybind.h>

#include "ProcessGroupAcme.hpp"
#include "occl_kit/flight_recorder.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, module) {
  // The base classes are torch's; importing their module registers them with pybind11.
  py::module_::import("torch._C._distributed_c10d");

  module.attr("BACKEND_NAME") = "acme";
  module.attr("DEVICES") = py::make_tuple("cpu", "cuda");
  module.attr("OPS") = py::make_tuple("allgather", "send", "barrier", "gather", "recv");

  using Backend = acme::c10d::ProcessGroupAcme;
  auto backend = py::class_<Backend, c10d::Backend, c10::intrusive_ptr<Backend>>(
      module, "ProcessGroupAcme");

  py::class_<Backend::Options, c10d::Backend::Options, c10::intrusive_ptr<Backend::Options>>(
      backend, "Options")
      .def(py::init([] { return c10::make_intrusive<Backend::Options>(); }))
      // torch's split_group deep-copies the parent's options.
      .def("__deepcopy__", [](const Backend::Options& self, const py::dict&) {
        return c10::make_intrusive<Backend::Options>(self);
      })
      .def_readwrite("address", &Backend::Options::address,
                     "Address to listen on.")
      .def_readwrite("port", &Backend::Options::port,
                     "Port to listen on.")
      .def_readwrite("verbose", &Backend::Options::verbose,
                     "Log every op.")
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
  if (!py::hasattr(backend, "allgather")) {
    backend.def("allgather", &Backend::allgather,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "send")) {
    backend.def("send", &Backend::send,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "barrier")) {
    backend.def("barrier", &Backend::barrier,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "gather")) {
    backend.def("gather", &Backend::gather,
                py::call_guard<py::gil_scoped_release>());
  }
  if (!py::hasattr(backend, "recv")) {
    backend.def("recv", &Backend::recv,
                py::call_guard<py::gil_scoped_release>());
  }
}
