"""An image-processing service with no copy, on either side, both ways.

A client writes a 1080p RGB frame into its request slot through a loan; a server reads the
request where it lies, writes the processed frame (its negative) into a response cell it
borrows, and the client reads that in place. Four copies of 6 MB that a byte-copying
service would make, not made.

    python image_service.py [ROOT]    # ROOT: where the domain lives (default /dev/shm)
"""

import sys
import threading

import numpy as np

import shmbus

HEIGHT, WIDTH = 1080, 1920
FRAME_LEN = HEIGHT * WIDTH * 3


def serve(server: shmbus.Server, calls: int) -> None:
    for _ in range(calls):
        # (`memoryview()` because numpy's type hints name the buffer types they take until
        # Python 3.12; at run time it is the same view.)
        req = server.recv(timeout=10)
        frame = np.frombuffer(memoryview(req), np.uint8)
        out = req.loan(timeout=10)
        np.subtract(255, frame, out=np.frombuffer(memoryview(out), np.uint8))
        del frame  # the request's bytes must not be viewed once it is answered
        out.send_last()


def main(root: str | None = None) -> None:
    domain = shmbus.Domain("image-service-example", root=root)
    svc = shmbus.Service.create_or_open(domain, "negative", max_request_len=FRAME_LEN, max_response_len=FRAME_LEN)
    with svc.server() as server, svc.client() as client:
        worker = threading.Thread(target=serve, args=(server, 3))
        worker.start()
        for shade in (0, 100, 200):
            loan = client.loan_request()
            frame = np.frombuffer(memoryview(loan), np.uint8).reshape(HEIGHT, WIDTH, 3)
            frame[:] = shade
            del frame  # every view must be gone before the request is sent
            rid = loan.send()
            with client.recv_response_ref(timeout=10) as response:
                image = np.frombuffer(memoryview(response), np.uint8).reshape(HEIGHT, WIDTH, 3)
                print(f"request {rid}: shade {shade} -> {int(image[0, 0, 0])}, copied: {image.flags.owndata}")
                del image
        worker.join()
    svc.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
