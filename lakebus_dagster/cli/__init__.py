"""The ``lakebus`` console command (:mod:`.main`); what every lakebus command line shares is :mod:`lakebus_dagster.commandline`."""
