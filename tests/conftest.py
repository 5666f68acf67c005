import os

from hypothesis import HealthCheck, settings

# "ci" bounds the property tests so the whole suite stays well under five minutes on two cores;
# "dev" is the default for local runs; "thorough" is for hunting (TOOLKERNEL_HYPOTHESIS=thorough).
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(
    os.environ.get("TOOLKERNEL_HYPOTHESIS", "ci" if os.environ.get("CI") else "dev")
)
