class BotoCoreError(Exception):
    fmt = "An unspecified error occurred"

    def __init__(self, **kwargs):
        super().__init__(self.fmt.format(**kwargs))


class NoCredentialsError(BotoCoreError):
    fmt = "Unable to locate credentials"


class ClientError(Exception):
    def __init__(self, error_response, operation_name):
        err = error_response.get("Error", {})
        super().__init__("An error occurred (%s) when calling the %s operation: %s" % (
            err.get("Code", "Unknown"), operation_name, err.get("Message", "Unknown")))
        self.response = error_response
        self.operation_name = operation_name
