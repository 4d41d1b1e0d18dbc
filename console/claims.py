"""The article's claims in words, for text that names them by number ("claim C4").

fabtop was built to check, measured, the claims of a vendor article on "scaleFabric", a
native credit-based lossless RDMA fabric, and its token-acceleration stack, against a
RoCEv2 fabric on the same topology. The article numbers nothing; the project numbers its
claims C1-C10. A scenario description or a report title that says "(claims C4, C6)" is
shown with the claims spelled out, so a reader needs neither the article nor the list.
"""

from __future__ import annotations

import re

#: Claim number -> what the article says, in a few words.
CLAIMS = {
    "C1": "GPUDirect RDMA skips the host copy",
    "C2": "IBGDA: the GPU posts its own work requests",
    "C3": "IBGDA needs matched versions; bring-up check",
    "C4": "remote NVMe over RDMA close to local",
    "C5": "NFS over RDMA keeps GPUs busy",
    "C6": "storage straight into GPU memory",
    "C7": "lower latency than RoCE over 3 switches",
    "C8": "lossless without PFC; PFC can deadlock",
    "C9": "KV transfer's share of TTFT grows with context",
    "C10": "800G, spraying, fast recovery",
}

_REF = re.compile(r"\((?:the article's )?claims? ((?:C\d+(?:, | and )?)+)\)|\(((?:C\d+(?:, )?)+)\)")


def spell_out_claims(text: str) -> str:
    """``"… (claims C4, C6)"`` -> ``"… (article claims: C4 remote NVMe …; C6 storage …)"``."""

    def words(m: re.Match[str]) -> str:
        ids = re.findall(r"C\d+", m.group(0))
        if not all(i in CLAIMS for i in ids):
            return m.group(0)
        return "(article claims: " + "; ".join(f"{i} {CLAIMS[i]}" for i in ids) + ")"

    return _REF.sub(words, text)
