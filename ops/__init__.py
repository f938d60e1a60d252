"""Operating memoryd from a checkout: benchmarks (`ops.bench`), fault drills (`ops.chaos`),
probes of the e5 engine (`ops.probes`), and the one helper they share for starting and
measuring the processes under test (`ops.stack`). Every command runs from the project root
as `python -m ops.<package>[.<command>]`."""
