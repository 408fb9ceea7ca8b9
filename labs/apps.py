from django.apps import AppConfig


class LabsConfig(AppConfig):
    name = "labs"
    label = "labs"
    verbose_name = "Labs"
