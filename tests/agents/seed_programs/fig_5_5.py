import threading
import time

from tether.agents import Behavior, action, loop


class Example(Behavior):
    def __init__(self) -> None:
        # State stored as attributes
        self.count = 0

    def on_setup(self) -> None:
        pass

    def on_shutdown(self) -> None:
        pass

    @action
    def square(self, value: float) -> float:
        return value**2

    @loop
    def count(self, shutdown: threading.Event) -> None:
        while not shutdown.is_set():
            self.count += 1
            time.sleep(1)
