"""The ``memnets`` commands of the training side: ``fit``, ``run``, ``eval``, ``data prepare``, ``export``,
``replay``, ``baseline`` and ``bench``. ``memnets.cli`` names them by string and imports one only when it runs;
each parses its arguments, calls one library function and prints what it returns."""
