"""Reads a run folder's event files with TensorBoard's own readers and writes what they saw as JSON.

    read_tensorboard_events.py RUN_FOLDER OUT_JSON

Both readers TensorBoard has: the classic EventAccumulator (simple_value scalars, as
`tensorboard --inspect` shows them) and the plugin EventAccumulator behind the Scalars dashboard,
which converts every scalar to a tensor first. The output:
    {"file_version": "brain.Event:2",
     "scalars": {tag: [[step, value], ...]},      # classic reader
     "dashboard": {tag: [[step, value], ...]}}    # plugin reader, tags the Scalars plugin lists
TensorBoard's readers stop quietly at a record whose CRC does not match, so a damaged file shows
up as missing points, which the test counts. Run with the test environment's Python
(scripts/setup.sh installs tensorboard there); TensorFlow is not needed.
"""
import json
import logging
import os
import sys

# Without TensorFlow, TensorBoard says it falls back to its stub: expected, not worth a line.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
logging.getLogger("tensorboard").setLevel(logging.ERROR)

from tensorboard.backend.event_processing import event_accumulator  # noqa: E402
from tensorboard.backend.event_processing import plugin_event_accumulator  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402


def main():
    folder, out_path = sys.argv[1], sys.argv[2]
    keep_everything = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}

    classic = event_accumulator.EventAccumulator(folder, size_guidance=keep_everything)
    classic.Reload()
    scalars = {
        tag: [[e.step, e.value] for e in classic.Scalars(tag)]
        for tag in classic.Tags()[event_accumulator.SCALARS]
    }

    plugin = plugin_event_accumulator.EventAccumulator(folder, size_guidance=keep_everything)
    plugin.Reload()
    dashboard = {
        tag: [[e.step, float(tensor_util.make_ndarray(e.tensor_proto))] for e in plugin.Tensors(tag)]
        for tag in plugin.PluginTagToContent("scalars")
    }

    with open(out_path, "w") as out:
        json.dump({"file_version": classic.file_version, "scalars": scalars, "dashboard": dashboard}, out)


if __name__ == "__main__":
    main()
