"""Which draft a speculative ``LLMContextFrame`` is, when a copy stands in for it on the way.

pipecat's ``EagerEndOfTurnCancelFrame`` (a draft withdrawn) is a system frame: it overtakes a
draft's ``LLMContextFrame`` still queued between the user aggregator and the LLM, so a
processor can see the cancel first and the context it withdrew after it. pipecat's frame ids
grow in creation order across the process (``pipecat.utils.utils.obj_id``), so a speculative
context made before the newest cancel was withdrawn, whatever order the two arrive in.
pipecat has no frame field for "the frame this one replaces", hence ``CREATED_AS``: a
processor that pushes a new context frame in place of one it was given (a grounded copy)
keeps the original's id there.
"""

from pipecat.frames.frames import Frame

# Key, in ``Frame.metadata`` of a frame pushed in place of another, of the id of the first one.
CREATED_AS = "brisk.created_as"


def created_as(frame: Frame) -> int:
    """The id of the frame ``frame`` stands in for (its own id when it replaces none)."""
    return frame.metadata.get(CREATED_AS, frame.id)


def stand_in(new: Frame, old: Frame) -> Frame:
    """``new``, marked as taking ``old``'s place (``old``'s metadata, and its creation id)."""
    new.metadata.update(old.metadata)
    new.metadata[CREATED_AS] = created_as(old)
    return new
