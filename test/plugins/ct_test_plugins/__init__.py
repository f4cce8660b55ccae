"""A third-party plugin package for ct_controllers (test/test_plugin_package.py runs it): a
controller (:mod:`ct_test_plugins.damping`) and a hardware backend
(:mod:`ct_test_plugins.double_integrator`), found through the entry points in pyproject.toml."""
