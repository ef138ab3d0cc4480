

def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (ctest python.gpu, scripts/gpu_python.sh)")
