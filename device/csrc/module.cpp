// occl_device._C. Loading it registers occldev with torch: the other translation units register
// the allocator, the device guard, the PrivateUse1 hooks and the kernels as the library loads.
// Its functions are what occl_device's Python device module is built on.
#include <Python.h>

#include "device.h"

#include <c10/util/Exception.h>

#include <exception>

namespace {

template <typename Body>
PyObject* translating_errors(Body body) {
  try {
    return body();
  } catch (const c10::Error& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what_without_backtrace());
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
  }
  return nullptr;
}

PyObject* memory_allocated(PyObject* /*module*/, PyObject* /*unused*/) {
  return PyLong_FromSize_t(occl_device::memory_allocated());
}

PyObject* host_addressable(PyObject* /*module*/, PyObject* /*unused*/) {
  return PyBool_FromLong(occl_device::host_addressable());
}

PyObject* device_count(PyObject* /*module*/, PyObject* /*unused*/) {
  return PyLong_FromLong(occl_device::device_count());
}

PyObject* current_device(PyObject* /*module*/, PyObject* /*unused*/) {
  return PyLong_FromLong(occl_device::current_device());
}

PyObject* exchange_device(PyObject* /*module*/, PyObject* index) {
  const long value = PyLong_AsLong(index);
  if (value == -1 && PyErr_Occurred()) {
    return nullptr;
  }
  return translating_errors(
      [value] { return PyLong_FromLong(occl_device::exchange_device(value)); });
}

PyMethodDef methods[] = {
    {"memory_allocated", memory_allocated, METH_NOARGS,
     "Bytes of occldev memory allocated and not yet freed, on all devices."},
    {"host_addressable", host_addressable, METH_NOARGS,
     "Whether data_ptr() of an occldev tensor is the host address of its bytes "
     "(OCCL_DEVICE_HOST_ADDRESSABLE)."},
    {"device_count", device_count, METH_NOARGS, "Number of occldev devices (OCCL_DEVICE_COUNT)."},
    {"current_device", current_device, METH_NOARGS, "The calling thread's current device."},
    {"exchange_device", exchange_device, METH_O,
     "Makes the device of this index current for the calling thread; returns the previous one."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "occl_device._C",
    "occldev's native part: allocator, device guard, PrivateUse1 hooks and kernels.", -1,
    methods,
};

} // namespace

PyMODINIT_FUNC PyInit__C() {
  // The options are read now, so that a bad value fails the import, not some later call.
  try {
    occl_device::host_addressable();
    occl_device::device_count();
  } catch (const c10::Error& error) {
    PyErr_SetString(PyExc_ValueError, error.what_without_backtrace());
    return nullptr;
  }
  return PyModule_Create(&module);
}
