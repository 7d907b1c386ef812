class Config:  # the client's settings (retries, timeouts): kept, not acted on (the fake has no network to retry)
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)
