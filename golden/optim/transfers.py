"""Golden models of the updater's memory traffic: the chunk schedule and one memory port's commands.

These are the contracts of ``rtl.optim.ChunkSequencer`` and ``rtl.optim.MemoryPort``, which
the updater kernel chains: the sequencer issues one DMA command per tensor per chunk, the port
serves each direction's commands strictly in order.

Chunk schedule (:func:`chunk_schedule`)
    Round ``j = 0, 1, ...`` issues chunk ``j`` of every tensor in tensor order; a tensor whose
    beats are used up (or that is disabled, or has zero beats) is passed over. A chunk is
    ``chunk_beats`` beats, the last one of a tensor whatever is left; that last command carries
    the tensor's ``tail_strobe``, every other an all-ones strobe. Addresses advance by
    ``data_width // 8`` bytes per beat, modulo ``2**address_width``.
Reads (:func:`read_beats`)
    Command ``(tensor, address, length)`` delivers the ``length`` beats of memory from
    ``address`` to its tensor's stream, commands in order. A beat is the little-endian integer
    of its ``data_width // 8`` bytes.
Writes (:func:`write_memory`)
    Each tensor's stream of beats is consumed command by command, in command order; command
    ``(tensor, address, length, strobe)`` writes its ``length`` beats from ``address``, the last
    one only in the bytes whose ``strobe`` bit is set.
"""

__all__ = ["chunk_schedule", "read_beats", "write_memory"]


def chunk_schedule(configs, *, data_width, address_width=64):
    """The commands a chunk sequencer issues for one run.

    Parameters
    ----------
    configs : sequence of dict
        Per tensor: ``address`` (bytes), ``beats``, ``chunk_beats`` (>= 1 when ``beats``),
        ``tail_strobe`` and ``enable``.
    data_width : int
        Beat width in bits (a power of two >= 8).
    address_width : int
        Addresses wrap modulo ``2**address_width``.

    Returns
    -------
    list of dict
        ``{"tensor", "address", "length", "strobe"}`` per command, in issue order.
    """
    beat_bytes = data_width // 8
    all_ones = (1 << beat_bytes) - 1
    space = 1 << address_width
    left = [config["beats"] if config["enable"] else 0 for config in configs]
    address = [config["address"] % space for config in configs]
    for tensor, config in enumerate(configs):
        if left[tensor] and config["chunk_beats"] < 1:
            raise ValueError(f"tensor {tensor}: chunk_beats must be >= 1, not {config['chunk_beats']}")
    commands = []
    while any(left):
        for tensor, config in enumerate(configs):
            if not left[tensor]:
                continue
            final = left[tensor] <= config["chunk_beats"]
            length = left[tensor] if final else config["chunk_beats"]
            commands.append({"tensor": tensor, "address": address[tensor], "length": length,
                             "strobe": config["tail_strobe"] if final else all_ones})
            left[tensor] -= length
            address[tensor] = (address[tensor] + length * beat_bytes) % space
    return commands


def _beat_bytes(data_width):
    if data_width < 8 or data_width & (data_width - 1):
        raise ValueError(f"data_width must be a power of two >= 8, not {data_width}")
    return data_width // 8


def read_beats(memory, commands, *, data_width, tensors):
    """Per tensor, the beats that ``commands`` read from ``memory`` (a bytes-like image at address 0).

    Returns
    -------
    list of list of int
        ``tensors`` lists of beats, each in command order.
    """
    beat_bytes = _beat_bytes(data_width)
    streams = [[] for _ in range(tensors)]
    for command in commands:
        base = command["address"]
        for beat in range(command["length"]):
            start = base + beat * beat_bytes
            streams[command["tensor"]].append(int.from_bytes(memory[start:start + beat_bytes], "little"))
    return streams


def write_memory(memory, commands, data, *, data_width):
    """``memory`` (bytes-like, address 0) after ``commands`` wrote the tensors' beat streams ``data``.

    Parameters
    ----------
    memory : bytes-like
        The image before the writes; it is not modified.
    commands : sequence of dict
        ``{"tensor", "address", "length", "strobe"}``, in order.
    data : sequence of sequence of int
        Per tensor, its beats; each command takes the next ``length`` of them.

    Returns
    -------
    bytearray
        The image after the writes.

    Raises
    ------
    ValueError
        If a tensor's stream runs out.
    """
    beat_bytes = _beat_bytes(data_width)
    image = bytearray(memory)
    taken = [0] * len(data)
    for command in commands:
        tensor = command["tensor"]
        for beat in range(command["length"]):
            if taken[tensor] >= len(data[tensor]):
                raise ValueError(f"tensor {tensor} has only {len(data[tensor])} beats")
            word = data[tensor][taken[tensor]].to_bytes(beat_bytes, "little")
            taken[tensor] += 1
            strobe = command["strobe"] if beat == command["length"] - 1 else (1 << beat_bytes) - 1
            start = command["address"] + beat * beat_bytes
            for byte in range(beat_bytes):
                if strobe >> byte & 1:
                    image[start + byte] = word[byte]
    return image
