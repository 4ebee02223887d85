#!/usr/bin/env python3
"""Makes the schema files of the CLI's schema tests (cli_schema.rs), once; they are
checked in, so the tests need no Python.

  imu.desc  a binary protobuf FileDescriptorSet of `demo.Imu` (built with the `protobuf`
            package's descriptor_pb2; no protoc needed)
  Imu.msg   sensor_msgs/msg/Imu as a ros2msg text with its dependencies (MCAP's
            concatenation), as rosbags generates it for ROS 2 Humble

Run it with the interop virtualenv's python (scripts/interop-venv.sh):
  target/interop-venv/bin/python crates/shmbus-cli/tests/data/make_data.py
"""
import os

from google.protobuf import descriptor_pb2
from rosbags.typesys import Stores, get_typestore

HERE = os.path.dirname(os.path.abspath(__file__))

F = descriptor_pb2.FieldDescriptorProto
fd = descriptor_pb2.FileDescriptorProto(name='demo/imu.proto', package='demo', syntax='proto3')
vec = fd.message_type.add(name='Vector3')
for i, n in enumerate(['x', 'y', 'z']):
    vec.field.add(name=n, number=i + 1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
imu = fd.message_type.add(name='Imu')
imu.field.add(name='frame_id', number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
imu.field.add(name='stamp_ns', number=2, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
imu.field.add(name='linear_acceleration', number=3, type=F.TYPE_MESSAGE, type_name='.demo.Vector3',
              label=F.LABEL_OPTIONAL)
imu.field.add(name='samples', number=4, type=F.TYPE_FLOAT, label=F.LABEL_REPEATED)
imu.field.add(name='count', number=5, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
with open(os.path.join(HERE, 'imu.desc'), 'wb') as f:
    f.write(descriptor_pb2.FileDescriptorSet(file=[fd]).SerializeToString())

text, _ = get_typestore(Stores.ROS2_HUMBLE).generate_msgdef('sensor_msgs/msg/Imu', ros_version=2)
with open(os.path.join(HERE, 'Imu.msg'), 'w') as f:
    f.write(text)
