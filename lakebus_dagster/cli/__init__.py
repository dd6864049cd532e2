"""The ``lakebus`` console command (:mod:`.main`) and what every lakebus command line shares (:mod:`.common`)."""
