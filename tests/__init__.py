"""Test packages.  This file exists so that ``tests/protocols`` is imported as
``tests.protocols``: without it pytest would put ``tests/`` on ``sys.path`` and
``tests/protocols`` would shadow the real ``protocols`` package."""
