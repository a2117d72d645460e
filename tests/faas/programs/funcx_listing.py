# The funcX paper's listing 1 (how the SDK registers and invokes process_stills) and
# listing 3 (intra-endpoint data through Redis), with only the import lines changed.
# The DIALS command is replaced by `echo` (no crystallography software here); the
# listing's `subprocess.run(cmd)` of a whole command line becomes a list of words.
import subprocess
import sys
import time

from tether.exceptions import TaskPending
from tether.faas import Client as FuncXClient


def process_stills(data):

    inputs = data['inputs']
    phil = data['phil']
    cmd = f'echo dials.stills_process {phil} {inputs}'
    res = subprocess.run(cmd.split(), capture_output=True, text=True)  # noqa: PLW1510
    return res.stdout


def example(key, data):
    from tether.faas.endpoint import get_redis_client

    rc = get_redis_client()
    rc.set(key, data)
    value = rc.get(key)
    rc.delete(key)
    return value


fc = FuncXClient()
func_id = fc.register_function(process_stills)
endpoint_id = sys.argv[1]
input_data = {'inputs': 'images/*.cbf', 'phil': 'stills.phil'}
task_id = fc.run(func_id, endpoint_id, data=input_data)
while True:
    try:
        res = fc.get_result(task_id)
        break
    except TaskPending:
        time.sleep(0.1)
assert res == 'dials.stills_process stills.phil images/*.cbf\n', res

redis_fn = fc.register_function(example)
task_id = fc.run(endpoint_id=endpoint_id, function_id=redis_fn, key=sys.argv[2], data=b'shared')
while True:
    try:
        assert fc.get_result(task_id) == b'shared'
        break
    except TaskPending:
        time.sleep(0.1)
print('funcx listings ok')
