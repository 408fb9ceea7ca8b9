import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0002_model_prompt_cache_prices"),
    ]

    operations = [
        migrations.AddField(
            model_name="tool",
            name="created_at",
            # Tools registered before this column existed get the migration's time.
            field=models.DateTimeField(auto_now_add=True, default=django.utils.timezone.now),
            preserve_default=False,
        ),
    ]
