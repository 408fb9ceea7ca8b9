"""The parts of `manage.py demo` (labs/management/commands/demo.py): its worker, its gateway
conversation and its report."""
