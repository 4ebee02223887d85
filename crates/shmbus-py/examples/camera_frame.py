"""A camera frame through a topic with no copy.

The publisher writes a 1080p RGB frame straight into the topic's shared memory through a
loan; the subscriber reads it in place as a numpy array pinned in shared memory. The frame
is never copied, on either side.

    python camera_frame.py [ROOT]    # ROOT: where the domain lives (default /dev/shm)
"""

import sys

import numpy as np

import shmbus

HEIGHT, WIDTH = 1080, 1920
FRAME_LEN = HEIGHT * WIDTH * 3


def main(root: str | None = None) -> None:
    domain = shmbus.Domain("camera-example", root=root)
    topic = shmbus.Topic.create_or_open(domain, "frames", max_message_len=FRAME_LEN, history=2)
    with topic.publisher() as pub, topic.subscriber() as sub:
        # Publisher: render into the slot itself. (`memoryview()` because numpy's type hints
        # name the buffer types they take until Python 3.12; at run time it is the same view.)
        loan = pub.loan()
        frame = np.frombuffer(memoryview(loan), np.uint8).reshape(HEIGHT, WIDTH, 3)
        frame[:] = (0, 0, 255)  # a blue frame ...
        frame[HEIGHT // 2, :] = (255, 255, 255)  # ... with a white line across
        del frame  # every view must be gone before the slot is published
        seq = loan.send()

        # Subscriber: look at it where it lies. The slot stays pinned while `image` lives.
        sample = sub.recv_ref(timeout=5)
        image = np.frombuffer(memoryview(sample), np.uint8).reshape(HEIGHT, WIDTH, 3)
        white_rows = int((image == 255).all(axis=(1, 2)).sum())
        print(f"frame {seq}: {image.shape}, {white_rows} white row(s), copied: {image.flags.owndata}")
        del image
        sample.release()
    topic.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
