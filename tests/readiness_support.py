"""Bucket settings the readiness and policy tests put on the moto server, with boto3 (the store's own API)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["allow_public_reads", "block_public_access", "bucket_of", "encrypt_bucket"]

BLOCK_ALL = ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")


def bucket_of(url: str) -> str:
    return url.removeprefix("s3://").split("/")[0]


def encrypt_bucket(client: Any, bucket: str, algorithm: str = "AES256") -> None:
    """Default encryption for every new object of ``bucket``."""
    rule = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": algorithm}}
    client.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [rule]})


def block_public_access(client: Any, bucket: str) -> None:
    """All four settings of the bucket's public access block on."""
    client.put_public_access_block(
        Bucket=bucket, PublicAccessBlockConfiguration=dict.fromkeys(BLOCK_ALL, True)
    )


def allow_public_reads(client: Any, bucket: str) -> None:
    """A bucket policy that lets anyone read every object."""
    statement = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/*",
    }
    client.put_bucket_policy(
        Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    )
