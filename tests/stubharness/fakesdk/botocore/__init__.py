"""Fake botocore (see ../boto3): the parts trainvm_helper.py's AWS_PROGRAM uses. session.get_session() with the
credential chain of the real one, by METHOD (env, shared files, ..., iam-role); get_credentials() takes the first
provider left that has credentials: ``env`` reads AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN],
``iam-role`` reads IMDSv2 over the stub world's network (pyfake/sitecustomize.py: a token PUT, then the role's
credentials; recorded as `http METHOD URL`), the others have none here. Not modelled: refresh, expiry, retries."""
